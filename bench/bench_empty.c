/*
 * bench_empty.c - empty functions in a shared library, called the way a
 * program compiled with an older loom.h calls loom_range_push and
 * loom_range_pop in libloom.so (through the PLT): bench_trigger_idle's floor
 * for a call that does nothing, and the never-taken call of its inline one.
 */
void bench_empty_push(const char *name);
void bench_empty_pop(void);

void bench_empty_push(const char *name) { (void)name; }
void bench_empty_pop(void) {}
