/*
 * test_ddp.c - DistributedDataParallel on 2 gloo ranks (tests/integrations/
 * ddp.py) under ONE `loom record`, started through torch.multiprocessing.spawn
 * and through torchrun: the merged trace holds both ranks as processes of
 * their own, each rank's cpu_op count inside its "workload" region equals
 * the count PyTorch's own profiler gives in the same rank of the same run,
 * both ranks' collectives carry their rank, and the trace's distributedInfo
 * names the gloo backend and a world of 2.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "testutil.h"

/* The profiler's count of rank r, from OUTDIR/rank<r>.txt; its pid in *pid. */
static long profiler_ops(const char *dir, int r, long *pid) {
  char path[512];
  snprintf(path, sizeof path, "%s/rank%d.txt", dir, r);
  char *s = read_file(path, NULL);
  assert_non_null(s);
  int rank = -1;
  long ops = -1;
  assert_int_equal(sscanf(s, "rank %d pid %ld profiler ops %ld", &rank, pid, &ops), 3);
  assert_int_equal(rank, r);
  free(s);
  return ops;
}

static void check_ranks(const char *trace, const char *dir) {
  for (int r = 0; r < 2; r++) {
    long pid = 0, want = profiler_ops(dir, r, &pid);
    char sql[1024];
    snprintf(sql, sizeof sql,
             "select count(*) from slice s join thread_track tt on s.track_id = tt.id "
             "join thread t using(utid) join process p using(upid) "
             "where p.pid = %ld and s.category = 'cpu_op' and exists (select 1 from slice w "
             "join thread_track wt on w.track_id = wt.id join thread t2 on t2.utid = wt.utid "
             "where w.name = 'workload' and t2.upid = p.upid and s.ts >= w.ts and "
             "s.ts <= w.ts + w.dur)", pid);
    long long got = tp_int(trace, sql);
    print_message("rank %d (pid %ld): loom %lld cpu_op in workload, profiler %ld\n", r, pid, got,
                  want);
    assert_int_equal(got, want);
    snprintf(sql, sizeof sql,
             "select count(*) from slice s join thread_track tt on s.track_id = tt.id "
             "join thread t using(utid) join process p using(upid) join args a on "
             "a.arg_set_id = s.arg_set_id where p.pid = %ld and s.name = 'c10d::allreduce_' "
             "and a.key = 'args.Rank' and a.int_value = %d", pid, r);
    assert_true(tp_int(trace, sql) > 0);
  }
  char *json = read_file(trace, NULL);
  assert_non_null(json);
  const char *di = strstr(json, "\"distributedInfo\"");
  assert_non_null(di);
  assert_non_null(strstr(di, "\"backend\":\"gloo\""));
  assert_non_null(strstr(di, "\"world_size\":2"));
  free(json);
  assert_int_equal(tp_errors(trace), 0);
}

static void run_ddp(const char *how) {
  tp_require();
  char trace[256], dir[256], cmd[4096], *out = NULL;
  tmp_path(trace, sizeof trace, ".json");
  tmp_path(dir, sizeof dir, ".d");
  snprintf(cmd, sizeof cmd, "mkdir -p '%s'", dir);
  assert_int_equal(system(cmd), 0);
  if (!strcmp(how, "spawn"))
    snprintf(cmd, sizeof cmd, "'%s' record -o '%s' -- '%s' '%s' spawn '%s' 2>&1", LOOM_BIN, trace,
             PYTHON, TORCH_DDP, dir);
  else /* Python 3.11 needs --redirects/--tee other than 0 with torch 1.13's torchrun */
    snprintf(cmd, sizeof cmd,
             "'%s' record -o '%s' -- '%s' -m torch.distributed.run --nproc_per_node 2 "
             "--master_port %d --redirects 1 --tee 1 '%s' worker '%s' 2>&1",
             LOOM_BIN, trace, PYTHON, 29500 + getpid() % 400, TORCH_DDP, dir);
  int rc = ts_run(cmd, &out);
  print_message("%s", out ? out : "");
  assert_int_equal(rc, 0);
  assert_non_null(strstr(out, "ddp done"));
  free(out);
  check_ranks(trace, dir);
  snprintf(cmd, sizeof cmd, "rm -rf '%s' '%s'", dir, trace);
  assert_int_equal(system(cmd), 0);
}

static void test_spawn(void **state) {
  (void)state;
  run_ddp("spawn");
}

static void test_torchrun(void **state) {
  (void)state;
  run_ddp("torchrun");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_spawn),
      cmocka_unit_test(test_torchrun),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
