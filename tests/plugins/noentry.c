/* A shared library named like a plug-in but without the entry point. */
__attribute__((visibility("default"))) int not_a_loom_plugin(void) { return 42; }
