/*
 * test_opencl.c - unmodified OpenCL programs (tests/opencl/clapp.c, linked
 * against libOpenCL, or loading it with dlopen) recorded by `loom record`
 * on POCL: exactly the kernels and transfers they enqueued, each with a
 * flow from its enqueue call and device times inside the host's brackets,
 * named queue tracks; identical program output with and without loom; two
 * queues from two threads; a queue the application made with profiling; an
 * application passing its own events; exit() before the end, a crash and
 * SIGINT still leave a valid trace, and the exit status passes through;
 * every allocation and free of tests/opencl/clmem.c, exactly, by memory kind.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

#include "testutil.h"

/* Runs a command, returns its wait status; stdout goes to *out. */
static int record(const char *app, const char *mode, const char *trace, char **out) {
  char cmd[2048];
  snprintf(cmd, sizeof cmd, "'%s' record -o '%s' -- '%s' %s 2>/dev/null", LOOM_BIN, trace, app, mode);
  return ts_run(cmd, out);
}

typedef struct counts {
  size_t kernels, copies, fills, calls, flows, queues;
  int brackets_ok;
  int marks_ok; /* every enqueue call is marked for loom report by what it enqueued */
} counts;

static counts inspect(loom_trace *t) {
  counts c = {0};
  c.brackets_ok = 1;
  c.marks_ok = 1;
  int64_t last_host_end = 0;
  for (size_t i = 0; i < loom_trace_event_count(t); i++) {
    loom_event_view v = {.struct_size = sizeof v};
    loom_trace_event(t, i, &v);
    c.kernels += v.kind == LOOM_KIND_KERNEL;
    c.copies += v.kind == LOOM_KIND_MEMCPY;
    c.fills += v.kind == LOOM_KIND_MEMSET;
    if (!strcmp(v.category, "opencl_runtime") || !strcmp(v.category, "opencl_sync")) {
      c.calls++;
      if (v.start_ns + v.dur_ns > last_host_end) last_host_end = v.start_ns + v.dur_ns;
    }
  }
  c.flows = loom_trace_flow_count(t);
  for (size_t i = 0; i < c.flows; i++) {
    loom_event_view call, work;
    ts_flow(t, i, &call, &work);
    /* Work starts after its enqueue began and ends before the host's last
     * call (finish, blocking read, wait) returned: 1 us of slack for the
     * clock conversion. */
    if (work.start_ns < call.start_ns - 1000 || work.start_ns + work.dur_ns > last_host_end + 1000 ||
        strcmp(call.category, "opencl_runtime") || work.device == UINT32_MAX)
      c.brackets_ok = 0;
    unsigned want = work.kind == LOOM_KIND_KERNEL ? LOOM_RECORD_F_LAUNCH : LOOM_RECORD_F_MEMORY;
    if (call.roles != want || work.roles) c.marks_ok = 0;
  }
  return c;
}

/* The recorded trace holds exactly these kernels and copies. */
static void expect_work(const char *trace, size_t kernels, size_t copies) {
  loom_trace *t = ts_load(trace);
  counts c = inspect(t);
  assert_int_equal(c.kernels, kernels);
  assert_int_equal(c.copies, copies);
  loom_trace_free(t);
  unlink(trace);
}

static void check_same_output(const char *app, const char *mode) {
  char trace[256], cmd[1024], *plain = NULL, *recorded = NULL;
  tmp_path(trace, sizeof trace, ".json");
  snprintf(cmd, sizeof cmd, "'%s' %s", app, mode);
  assert_int_equal(ts_run(cmd, &plain), 0);
  assert_int_equal(record(app, mode, trace, &recorded), 0);
  assert_string_equal(plain, recorded);
  free(plain);
  free(recorded);
  unlink(trace);
}

/* Records app's "basic 4" and checks the trace; returns the number of
 * OpenCL calls in it. */
static size_t basic_for(const char *app) {
  char trace[256];
  tmp_path(trace, sizeof trace, ".json");
  assert_int_equal(record(app, "basic 4", trace, NULL), 0);
  loom_trace *t = ts_load(trace);
  counts c = inspect(t);
  assert_int_equal(c.kernels, 4);
  assert_int_equal(c.copies, 2); /* one write, one read */
  assert_int_equal(c.flows, 6);
  assert_true(c.brackets_ok);
  assert_true(c.marks_ok);
  loom_trace_summary s = {.struct_size = sizeof s};
  loom_trace_summarize(t, &s);
  assert_int_equal(s.devices, 1);
  assert_int_equal(s.dropped, 0);
  assert_int_equal(loom_trace_warning_count(t), 0);
  /* trace_processor sees the same: every event (plus the window end), the
   * flows, the named queue track, no errors. */
  const char *q[] = {"select count(*) from slice",
                     "select count(*) from flow",
                     "select count(*) from slice where category = 'kernel'",
                     "select count(*) from thread where name = 'queue 1'",
                     "select count(*) from stats where value > 0 and severity in ('error','data_loss')"};
  long long r[5];
  tp_ints(trace, q, r, 5);
  assert_int_equal(r[0], (long long)loom_trace_event_count(t) + 1);
  assert_int_equal(r[1], 6);
  assert_int_equal(r[2], 4);
  assert_int_equal(r[3], 1);
  assert_int_equal(r[4], 0);
  loom_trace_free(t);
  unlink(trace);
  return c.calls;
}

/* The programs recorded between count_clocks() and clocks_counted() run
 * with tests/opencl/clockcount.c preloaded: the clock_gettime calls loom's
 * libraries made in the last clapp. */
static char count_file[256];
/* Whether loom times calls with the time-stamp counter here (an invariant
 * one, as src/record/hostrec.c decides), LOOM_NO_TSC aside. */
static int tsc_usable(void) {
#if defined(__x86_64__) || defined(__i386__)
  unsigned a, b, c, d;
  if (__get_cpuid(0x80000007, &a, &b, &c, &d)) return (d >> 8) & 1;
#endif
  return 0;
}
static void count_clocks(void) {
  tmp_path(count_file, sizeof count_file, ".count");
  setenv("LD_PRELOAD", CLOCKCOUNT, 1);
  setenv("CLOCKCOUNT_OUT", count_file, 1);
  setenv("CLOCKCOUNT_PROG", "clapp", 1);
}
static long clocks_counted(void) {
  unsetenv("LD_PRELOAD");
  unsetenv("CLOCKCOUNT_OUT");
  unsetenv("CLOCKCOUNT_PROG");
  char *text = read_file(count_file, NULL);
  assert_non_null(text);
  long n = atol(text);
  free(text);
  unlink(count_file);
  return n;
}
static long clocks_with_tsc = -1;

static void test_linked(void **state) {
  (void)state;
  count_clocks();
  basic_for(CLAPP);
  clocks_with_tsc = clocks_counted();
  check_same_output(CLAPP, "basic 6");
}

/* Calls are timed with the time-stamp counter where it is usable; with
 * LOOM_NO_TSC on CLOCK_MONOTONIC_RAW: device work still falls inside the
 * brackets of its calls either way.  Without the counter each call reads
 * the clock twice through clock_gettime, which it did not with it (where
 * the counter is usable: test_linked's run used clock_gettime for the
 * session's own clock work only); asked: one per call more, which leaves
 * room for the session's own reads to differ between the two runs. */
static void test_without_tsc(void **state) {
  (void)state;
  setenv("LOOM_NO_TSC", "1", 1);
  count_clocks();
  size_t calls = basic_for(CLAPP);
  long without = clocks_counted();
  print_message("clock_gettime calls from loom: %ld with the TSC, %ld without; %zu calls\n",
                clocks_with_tsc, without, calls);
  assert_true(clocks_with_tsc >= 0); /* test_linked ran */
  if (!tsc_usable()) skip(); /* the same clock both times */
  assert_true(without - clocks_with_tsc >= (long)calls);
}

static int unset_no_tsc(void **state) {
  (void)state;
  return unsetenv("LOOM_NO_TSC");
}

static void test_dlopen(void **state) {
  (void)state;
  basic_for(CLAPP_DL);
  check_same_output(CLAPP_DL, "basic 6");
}

static void test_app_events_and_profiling(void **state) {
  (void)state;
  check_same_output(CLAPP, "events 5");     /* its callbacks all fire */
  check_same_output(CLAPP, "profiling 3");  /* sees its own profiling on */
  check_same_output(CLAPP, "basic 2");      /* sees profiling off */
  char trace[256];
  tmp_path(trace, sizeof trace, ".json");
  assert_int_equal(record(CLAPP, "events 5", trace, NULL), 0);
  loom_trace *t = ts_load(trace);
  counts c = inspect(t);
  assert_int_equal(c.kernels, 5);
  assert_int_equal(c.copies, 2);
  assert_int_equal(c.flows, 7);
  assert_true(c.brackets_ok);
  assert_true(c.marks_ok);
  loom_trace_free(t);
  assert_int_equal(record(CLAPP, "profiling 3", trace, NULL), 0);
  t = ts_load(trace);
  c = inspect(t);
  assert_int_equal(c.kernels, 3);
  assert_int_equal(c.copies, 2);
  assert_int_equal(c.fills, 1);
  assert_int_equal(c.flows, 6);
  loom_trace_free(t);
  unlink(trace);
}

static void test_two_threads_two_queues(void **state) {
  (void)state;
  check_same_output(CLAPP, "threads 3");
  char trace[256];
  tmp_path(trace, sizeof trace, ".json");
  assert_int_equal(record(CLAPP, "threads 3", trace, NULL), 0);
  loom_trace *t = ts_load(trace);
  counts c = inspect(t);
  assert_int_equal(c.kernels, 6);
  assert_int_equal(c.copies, 4);
  assert_int_equal(c.flows, 10);
  assert_true(c.brackets_ok);
  assert_true(c.marks_ok);
  const char *q[] = {"select count(*) from thread where name like 'queue %'",
                     "select count(distinct utid) from thread_track join slice on slice.track_id = thread_track.id where slice.category = 'opencl_runtime'"};
  long long r[2];
  tp_ints(trace, q, r, 2);
  assert_int_equal(r[0], 2);
  assert_true(r[1] >= 2); /* the two worker threads called OpenCL */
  loom_trace_free(t);
  unlink(trace);
}

/* Records mode's trace and checks what every case of many commands must
 * hold: the kernels and copies, one flow each, every command inside its
 * call's bracket, nothing lost, no warning, and trace_processor agrees;
 * then more(t, c) when given. */
static void many_commands(const char *mode, size_t kernels, size_t copies,
                          void (*more)(loom_trace *, const counts *)) {
  char trace[256];
  tmp_path(trace, sizeof trace, ".json");
  assert_int_equal(record(CLAPP, mode, trace, NULL), 0);
  loom_trace *t = ts_load(trace);
  counts c = inspect(t);
  assert_int_equal(c.kernels, kernels);
  assert_int_equal(c.copies, copies);
  assert_int_equal(c.flows, kernels + copies);
  assert_true(c.brackets_ok);
  assert_true(c.marks_ok);
  if (more) more(t, &c);
  loom_trace_summary s = {.struct_size = sizeof s};
  loom_trace_summarize(t, &s);
  assert_int_equal(s.dropped, 0);
  assert_int_equal(loom_trace_warning_count(t), 0);
  const char *q[] = {"select count(*) from slice where category = 'kernel'",
                     "select count(*) from flow",
                     "select count(*) from stats where value > 0 and severity in ('error','data_loss')"};
  long long r[3];
  tp_ints(trace, q, r, 3);
  assert_int_equal(r[0], (long long)kernels);
  assert_int_equal(r[1], (long long)(kernels + copies));
  assert_int_equal(r[2], 0);
  loom_trace_free(t);
  unlink(trace);
}

/* Each of the two threads' calls link to one queue, a different one, and
 * each thread's 400 kernels and 2 copies are there. */
static void per_thread_queues(loom_trace *t, const counts *c) {
  int64_t tid[2] = {0, 0}, queue[2] = {0, 0};
  size_t per[2] = {0, 0}, bad = 0;
  for (size_t i = 0; i < c->flows; i++) {
    loom_event_view call, work;
    ts_flow(t, i, &call, &work);
    int k = tid[0] == 0 || tid[0] == call.tid ? 0 : tid[1] == 0 || tid[1] == call.tid ? 1 : -1;
    if (k < 0) { bad++; continue; }
    if (!tid[k]) tid[k] = call.tid, queue[k] = work.tid;
    if (queue[k] != work.tid) bad++;
    per[k]++;
  }
  assert_int_equal(bad, 0);
  assert_true(queue[0] != queue[1]);
  assert_int_equal(per[0], 402);
  assert_int_equal(per[1], 402);
}

/* Two threads, each enqueueing 400 kernels on its own queue, so both rings
 * pass the 256 commands at which an enqueue looks for ended ones (and look
 * again every 64) while the other thread enqueues: nothing lost, and every
 * command on the queue of the thread that enqueued it. */
static void test_two_threads_many_commands(void **state) {
  (void)state;
  many_commands("threads 400", 800, 4, per_thread_queues);
}

/* 1000 kernels on an in-order queue with no clFinish (a blocking read ends
 * it): the ring is harvested while the program enqueues, with the ended
 * commands found by a binary search over their statuses. */
static void test_many_commands_in_order(void **state) {
  (void)state;
  many_commands("basic 1000", 1000, 2, NULL);
}

/* 600 kernels on an out-of-order queue, where commands may end in any
 * order: each is asked, none is taken for ended by its place.  Then 600
 * made ready at once by a user event: POCL starts such a burst newest first
 * and reports up to ~100 running at once on 2 cores, so they take many
 * lanes, and trace_processor still keeps every one (it dropped 184 of 600
 * when lanes stopped at 32). */
static void test_many_commands_out_of_order(void **state) {
  (void)state;
  many_commands("ooo 600", 600, 1, NULL);
  check_same_output(CLAPP, "ooo 300");
  many_commands("burst 600", 600, 1, NULL);
  check_same_output(CLAPP, "burst 300");
}

static void test_exit_and_crash(void **state) {
  (void)state;
  char trace[256];
  tmp_path(trace, sizeof trace, ".json");
  int st = record(CLAPP, "exit 4", trace, NULL);
  assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 3);
  loom_trace *t = ts_load(trace);
  counts c = inspect(t);
  loom_trace_summary s = {.struct_size = sizeof s};
  loom_trace_summarize(t, &s);
  assert_int_equal(c.kernels + c.copies + s.dropped, 5); /* recorded or counted */
  loom_trace_free(t);
  unlink(trace);
  st = record(CLAPP, "crash 4", trace, NULL);
  /* loom record ends the way the program did: by SIGSEGV */
  assert_true((WIFSIGNALED(st) && WTERMSIG(st) == SIGSEGV) ||
              (WIFEXITED(st) && WEXITSTATUS(st) == 128 + SIGSEGV));
  expect_work(trace, 4, 2);
}

static void test_sigint_forwarded(void **state) {
  (void)state;
  char trace[256];
  tmp_path(trace, sizeof trace, ".json");
  int fd[2];
  assert_int_equal(pipe(fd), 0);
  pid_t pid = fork();
  if (pid == 0) {
    dup2(fd[1], 1);
    close(fd[0]);
    execl(LOOM_BIN, LOOM_BIN, "record", "-o", trace, "--", CLAPP, "sleep", "2", (char *)NULL);
    _exit(127);
  }
  close(fd[1]);
  char buf[256] = "";
  size_t n = 0;
  while (n < sizeof buf - 1 && !strstr(buf, "ready")) {
    ssize_t k = read(fd[0], buf + n, sizeof buf - 1 - n);
    if (k <= 0) break;
    n += (size_t)k;
    buf[n] = 0;
  }
  assert_non_null(strstr(buf, "ready"));
  kill(pid, SIGINT); /* to loom record, which forwards it */
  int st = 0;
  waitpid(pid, &st, 0);
  close(fd[0]);
  assert_true((WIFSIGNALED(st) && WTERMSIG(st) == SIGINT) ||
              (WIFEXITED(st) && WEXITSTATUS(st) == 128 + SIGINT));
  expect_work(trace, 2, 2);
}

/* --duration: the trace is written while the program still runs. */
static void test_duration(void **state) {
  (void)state;
  char trace[256];
  tmp_path(trace, sizeof trace, ".json");
  pid_t pid = fork();
  if (pid == 0) {
    int devnull = open("/dev/null", O_WRONLY);
    dup2(devnull, 1);
    execl(LOOM_BIN, LOOM_BIN, "record", "--duration", "1", "-o", trace, "--", CLAPP, "sleep", "2",
          (char *)NULL);
    _exit(127);
  }
  int found = 0;
  for (int i = 0; i < 200 && !found; i++) { /* up to 20 s */
    found = access(trace, R_OK) == 0;
    usleep(100000);
  }
  int st = 0;
  assert_int_equal(waitpid(pid, &st, WNOHANG), 0); /* the program is still running */
  kill(pid, SIGTERM);
  waitpid(pid, &st, 0);
  assert_true(found);
  expect_work(trace, 2, 2);
}

/* The bundled workload marks framework ops with loom's API: every kernel
 * and copy it launches carries the External id of the op around it. */
static void test_framework_ops_link_device_work(void **state) {
  (void)state;
#ifdef PIPELINE
  char trace[256], cmd[1024];
  tmp_path(trace, sizeof trace, ".json");
  snprintf(cmd, sizeof cmd, "'%s' record -o '%s' -- '%s' 3 >/dev/null 2>&1", LOOM_BIN, trace, PIPELINE);
  assert_int_equal(system(cmd), 0);
  loom_trace *t = ts_load(trace);
  size_t kernels = 0, linked = 0, ops = 0;
  for (size_t i = 0; i < loom_trace_event_count(t); i++) {
    loom_event_view v = {.struct_size = sizeof v};
    loom_trace_event(t, i, &v);
    ops += v.kind == LOOM_KIND_CPU_OP;
    if (v.kind == LOOM_KIND_KERNEL) {
      kernels++;
      linked += v.external_id >= 100; /* the ops of the batches are numbered from 100 */
    }
  }
  assert_int_equal(kernels, 3 * 5); /* gemm, bias_relu, gemm, softmax, argmax per batch */
  assert_int_equal(linked, kernels);
  assert_int_equal(ops, 1 + 3 * 5); /* model::load + 5 ops per batch */
  loom_trace_free(t);
  unlink(trace);
#else
  skip();
#endif
}

/* ---- memory (tests/opencl/clmem.c) ---------------------------------------- */
/* Memory events of a trace by memory kind: allocations and frees, their
 * bytes; when each free of a buffer of `watch` bytes happened (up to 4). */
enum { MK_DEVICE, MK_PINNED, MK_HOST, MK_SHARED, MK_N };
typedef struct mem_tally {
  size_t allocs[MK_N], frees[MK_N], others, no_device;
  unsigned long long alloc_bytes[MK_N], free_bytes[MK_N];
  int64_t finish[8]; /* the clFinish calls' starts, in order */
  size_t nfinish;
  int64_t freed_at[3]; /* the frees of 1 MiB, 4096 device and 65536 bytes */
} mem_tally;

static int mem_kind(const char *k) {
  static const char *const names[MK_N] = {"device", "host_pinned", "host", "shared"};
  for (int i = 0; i < MK_N; i++)
    if (k && !strcmp(k, names[i])) return i;
  return -1;
}

static void mem_event(mem_tally *m, loom_trace *t, size_t i, const loom_event_view *v) {
  loom_arg a[8];
  size_t n = loom_trace_event_args(t, i, a, 8);
  unsigned long long bytes = 0;
  const char *kind = NULL;
  int has_device = 0;
  for (size_t k = 0; k < n && k < 8; k++) {
    if (!strcmp(a[k].key, "bytes")) bytes = a[k].type == LOOM_ARG_INT ? (unsigned long long)a[k].v.i
                                                                       : a[k].v.u;
    if (!strcmp(a[k].key, "memory_kind")) kind = a[k].v.s;
    has_device |= !strcmp(a[k].key, "device");
  }
  int mk = mem_kind(kind);
  int is_free = !strncmp(v->name, "clRelease", 9) || strstr(v->name, "SVMFree") != NULL;
  if (v->kind != LOOM_KIND_MEMORY) return;
  if (mk < 0 || v->device != UINT32_MAX) {
    m->others++;
    return;
  }
  m->no_device += !has_device;
  if (is_free) {
    m->frees[mk]++;
    m->free_bytes[mk] += bytes;
    int w = bytes == 1048576 ? 0 : bytes == 4096 && mk == MK_DEVICE ? 1 : bytes == 65536 &&
            mk == MK_PINNED ? 2 : -1;
    if (w >= 0) m->freed_at[w] = v->start_ns;
  } else {
    m->allocs[mk]++;
    m->alloc_bytes[mk] += bytes;
  }
}

static mem_tally mem_count(loom_trace *t) {
  mem_tally m = {0};
  for (size_t i = 0; i < loom_trace_event_count(t); i++) {
    loom_event_view v = {.struct_size = sizeof v};
    loom_trace_event(t, i, &v);
    if (!strcmp(v.name, "clFinish") && m.nfinish < 8) m.finish[m.nfinish++] = v.start_ns;
    mem_event(&m, t, i, &v);
  }
  return m;
}

/* Every allocation and free, exactly: by memory kind, counts and bytes; a
 * sub-buffer and an image over a buffer are not counted, and their buffers
 * are freed at the last release of the buffer and its views (after the
 * clFinish the program makes before that release), as is a buffer the
 * program retained; the leaked buffer has no free; SVM where the device
 * has it; a thousand buffers alive at once, each freed once.
 * trace_processor reads the same, with no error. */
static void test_memory(void **state) {
  (void)state;
  tp_require();
  char trace[256], *out = NULL;
  tmp_path(trace, sizeof trace, ".json");
  assert_int_equal(record(CLMEM, "", trace, &out), 0);
  int svm = strstr(out, "svm yes") != NULL;
  if (!svm) printf("test_memory: SVM not checked: %s", strstr(out, "svm no") ? out : "?\n");
  free(out);
  loom_trace *t = ts_load(trace);
  mem_tally m = mem_count(t);
  assert_int_equal(m.others, 0);
  assert_int_equal(m.no_device, 0);
  /* device: 1 MiB (with its sub-buffer), 4096 (under an image), 8192 (with
   * properties), an 8192-byte image, 2048 leaked, 1000 of 96 bytes */
  assert_int_equal(m.allocs[MK_DEVICE], 5 + 1000);
  assert_int_equal(m.alloc_bytes[MK_DEVICE], 1048576 + 4096 + 8192 + 8192 + 2048 + 96000);
  assert_int_equal(m.frees[MK_DEVICE], 4 + 1000);
  assert_int_equal(m.free_bytes[MK_DEVICE], 1048576 + 4096 + 8192 + 8192 + 96000);
  assert_int_equal(m.allocs[MK_PINNED], 1);
  assert_int_equal(m.alloc_bytes[MK_PINNED], 65536);
  assert_int_equal(m.frees[MK_PINNED], 1);
  assert_int_equal(m.free_bytes[MK_PINNED], 65536);
  assert_int_equal(m.allocs[MK_HOST], 1);
  assert_int_equal(m.alloc_bytes[MK_HOST], 4096);
  assert_int_equal(m.frees[MK_HOST], 1);
  assert_int_equal(m.free_bytes[MK_HOST], 4096);
  assert_int_equal(m.allocs[MK_SHARED], svm ? 2 : 0);
  assert_int_equal(m.alloc_bytes[MK_SHARED], svm ? 65536 + 32768 : 0);
  assert_int_equal(m.frees[MK_SHARED], svm ? 2 : 0);
  assert_int_equal(m.free_bytes[MK_SHARED], svm ? 65536 + 32768 : 0);
  assert_true(m.nfinish >= 3);
  for (int w = 0; w < 3; w++) assert_true(m.freed_at[w] > m.finish[w]);
  loom_trace_free(t);
  /* Kineto's [memory] instants: the call in loom_call, Bytes negative on a
   * free */
  const char *q[] = {
      "select count(*) from slice s join args c on c.arg_set_id = s.arg_set_id and c.key = "
      "'args.loom_call' where s.name = '[memory]' and c.string_value not in "
      "('clReleaseMemObject', 'clSVMFree', 'clEnqueueSVMFree')",
      "select count(*) from slice s join args c on c.arg_set_id = s.arg_set_id and c.key = "
      "'args.loom_call' where s.name = '[memory]' and c.string_value in "
      "('clReleaseMemObject', 'clSVMFree', 'clEnqueueSVMFree')",
      ("select sum(b.int_value) from slice s join args b on b.arg_set_id = s.arg_set_id and "
       "b.key = 'args.Bytes' where s.name = '[memory]' and b.int_value > 0"),
      "select count(*) from stats where value > 0 and severity in ('error','data_loss')"};
  long long r[4];
  tp_ints(trace, q, r, 4);
  assert_int_equal(r[0], 1007 + (svm ? 2 : 0));
  assert_int_equal(r[1], 1006 + (svm ? 2 : 0));
  assert_int_equal(r[2], 1071104 + 96000 + 65536 + 4096 + (svm ? 98304 : 0));
  assert_int_equal(r[3], 0);
  unlink(trace);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_linked),
      cmocka_unit_test_teardown(test_without_tsc, unset_no_tsc),
      cmocka_unit_test(test_dlopen),
      cmocka_unit_test(test_app_events_and_profiling),
      cmocka_unit_test(test_two_threads_two_queues),
      cmocka_unit_test(test_two_threads_many_commands),
      cmocka_unit_test(test_many_commands_in_order),
      cmocka_unit_test(test_many_commands_out_of_order),
      cmocka_unit_test(test_exit_and_crash),
      cmocka_unit_test(test_sigint_forwarded),
      cmocka_unit_test(test_duration),
      cmocka_unit_test(test_framework_ops_link_device_work),
      cmocka_unit_test(test_memory),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
