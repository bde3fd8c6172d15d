/*
 * bench_empty.c - empty functions in a shared library, called the way a
 * program calls loom_range_push and loom_range_pop in libloom.so (through
 * the PLT): bench_trigger_idle's floor for a call that does nothing.
 */
void bench_empty_push(const char *name);
void bench_empty_pop(void);

void bench_empty_push(const char *name) { (void)name; }
void bench_empty_pop(void) {}
