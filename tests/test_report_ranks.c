/*
 * test_report_ranks.c - `loom report`'s cross-rank figures against answers
 * worked out by hand on tests/data/report/ranks (written by gen.py there).
 *
 * 4 ranks, 5 steps; step s starts at (s-1)*400 ms on every rank.  In each:
 * compute 10 ms, MPI_Barrier (leaves 0.1 ms after the last enter), compute
 * 10 ms, MPI_Allreduce (leaves 0.2 ms after the last enter), compute 10 ms,
 * a ring: MPI_Irecv at t0 (10 us), MPI_Isend to r+1 at t0+20 us (10 us),
 * MPI_Waitall at t0+40 us leaving 50 us after the later of its enter and
 * its sender's Isend enter; the step ends 1 ms after the Waitall.  Rank 2
 * computes 50 ms longer before each of the three in step 3.
 *
 * Normal step (ms): barrier [10, 10.1), allreduce [20.1, 20.3), t0 = 30.3,
 * Waitall [30.34, 30.39), step 31.39; nobody waits (the Isend at 30.32 is
 * before every Waitall's enter, the collectives are entered together).
 * Step 3: barrier enters 10 (rank 2: 60), all leave 60.1: Wait at Barrier
 * 50 ms on ranks 0, 1, 3; allreduce enters 70.1 (rank 2: 120.1), leaves
 * 120.3: Wait at N x N 50 ms on ranks 0, 1, 3; t0 = 130.3 (rank 2: 180.3).
 * Rank 3 receives from rank 2: its Waitall enters 130.34, rank 2's Isend
 * enters 180.32: Late Sender 49.98 ms, it leaves 180.37, step 181.37.
 * Rank 2's Waitall [180.34, 180.39), step 181.39; ranks 0, 1: 131.39.
 * Rank 2 caused 3 x 50 + 3 x 50 + 49.98 = 349.98 ms of waiting: the
 * straggler of step 3, and of no other step (nobody waited there).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>
#include <yajl/yajl_tree.h>

#include "loom/loom.h"
#include "testutil.h"

#define DIR LOOM_TESTS_DIR "/data/report/ranks/"
#define MS 1000000LL

/* The report of trace (and more, one rank each) as parsed JSON; threshold:
 * the options' wait_threshold_ns. */
static yajl_val report_with(const char *trace, const char *const *more, size_t nmore, int64_t threshold) {
  loom_report_options o = {.struct_size = sizeof o, .more_traces = more, .nmore_traces = nmore,
                           .wait_threshold_ns = threshold};
  loom_report *r = NULL;
  if (loom_report_open(trace, &o, &r) != LOOM_OK) fail_msg("loom_report_open(%s): %s", trace, loom_last_error());
  char out[512];
  tmp_path(out, sizeof out, ".ranks.json");
  assert_int_equal(loom_report_write(r, LOOM_REPORT_JSON, out), LOOM_OK);
  loom_report_free(r);
  size_t n;
  char *text = read_file(out, &n);
  unlink(out);
  assert_non_null(text);
  char err[256];
  yajl_val v = yajl_tree_parse(text, err, sizeof err);
  free(text);
  if (!v) fail_msg("report JSON does not parse: %s", err);
  return v;
}

static yajl_val report_of(const char *trace, const char *const *more, size_t nmore) {
  return report_with(trace, more, nmore, 0);
}

static yajl_val get(yajl_val v, const char *a, const char *b, const char *c) {
  const char *p[4] = {a, b, c, NULL};
  return yajl_tree_get(v, p, yajl_t_any);
}

static long long num(yajl_val v, const char *key) {
  const char *p[2] = {key, NULL};
  yajl_val x = yajl_tree_get(v, p, yajl_t_any);
  if (!x || !YAJL_IS_NUMBER(x)) fail_msg("no number at %s", key);
  return (long long)YAJL_GET_DOUBLE(x);
}

/* Row i of table key in the "ranks" section. */
static yajl_val trow(yajl_val rep, const char *key, size_t i) {
  yajl_val rows = get(rep, "ranks", "tables", key);
  const char *p[2] = {"rows", NULL};
  rows = rows ? yajl_tree_get(rows, p, yajl_t_array) : NULL;
  if (!rows || i >= rows->u.array.len) fail_msg("table %s has no row %zu", key, i);
  return rows->u.array.values[i];
}

static void check_ranks(yajl_val rep) {
  yajl_val k = get(rep, "ranks", NULL, NULL);
  assert_non_null(k);
  assert_int_equal(num(k, "count"), 4);
  assert_int_equal(num(k, "messages"), 20); /* 4 ranks x 5 steps, all matched */
  assert_int_equal(num(k, "unmatched_sends"), 0);
  assert_int_equal(num(k, "unmatched_receives"), 0);
  assert_int_equal(num(k, "collective_instances"), 10);
  assert_int_equal(num(k, "slowest_step"), 3);
  assert_int_equal(num(k, "pace_rank"), 2);
  for (size_t r = 0; r < 4; r++) {
    yajl_val row = trow(rep, "ranks", r);
    assert_int_equal(num(row, "rank"), (long long)r);
    assert_int_equal(num(row, "steps"), 5);
    long long late = r == 2 ? 0 : 50 * MS;
    assert_int_equal(num(row, "wait_barrier_ns"), late);
    assert_int_equal(num(row, "wait_nxn_ns"), late);
    assert_int_equal(num(row, "late_sender_ns"), r == 3 ? 49980000 : 0);
    assert_int_equal(num(row, "late_receiver_ns"), 0);
    assert_int_equal(num(row, "late_broadcast_ns"), 0);
    assert_int_equal(num(row, "early_reduce_ns"), 0);
    assert_int_equal(num(row, "caused_ns"), r == 2 ? 349980000 : 0);
    assert_int_equal(num(row, "straggler_steps"), r == 2 ? 1 : 0);
    /* barrier 0.1 + allreduce 0.2 + Irecv 0.01 + Isend 0.01 + Waitall 0.05
     * per normal step; step 3 adds the waiting (rank 2 waits nowhere). */
    long long comm = 5 * 370000LL + (r == 2 ? 0 : 100 * MS) + (r == 3 ? 49980000 : 0);
    assert_int_equal(num(row, "communication_ns"), comm);
  }
  for (size_t s = 0; s < 5; s++) {
    yajl_val row = trow(rep, "steps", s);
    assert_int_equal(num(row, "step"), (long long)s + 1);
    assert_int_equal(num(row, "ranks"), 4);
    assert_int_equal(num(row, "waiting_ns"), s == 2 ? 349980000 : 0);
    assert_int_equal(num(row, "max_ns"), s == 2 ? 181390000 : 31390000);
    assert_int_equal(num(row, "min_ns"), s == 2 ? 131390000 : 31390000);
    const char *p[2] = {"straggler", NULL};
    yajl_val who = yajl_tree_get(row, p, yajl_t_any);
    if (s == 2) assert_int_equal(num(row, "straggler"), 2);
    else assert_true(who && YAJL_IS_NULL(who)); /* nobody waited: no straggler */
  }
  static const long long step3[4] = {131390000, 131390000, 181390000, 181370000};
  static const long long wait3[4] = {100 * MS, 100 * MS, 0, 149980000};
  for (size_t r = 0; r < 4; r++)
    for (size_t s = 0; s < 5; s++) {
      yajl_val row = trow(rep, "rank_steps", r * 5 + s);
      assert_int_equal(num(row, "rank"), (long long)r);
      assert_int_equal(num(row, "step"), (long long)s + 1);
      assert_int_equal(num(row, "step_time_ns"), s == 2 ? step3[r] : 31390000);
      assert_int_equal(num(row, "waiting_ns"), s == 2 ? wait3[r] : 0);
    }
  /* per call site: the three ranks that waited, at each of the three */
  yajl_val site = trow(rep, "wait_sites", 2);
  assert_string_equal(YAJL_GET_STRING(get(site, "call", NULL, NULL)), "MPI_Waitall");
  assert_string_equal(YAJL_GET_STRING(get(site, "state", NULL, NULL)), "late_sender");
  assert_int_equal(num(site, "calls"), 1);
  assert_int_equal(num(site, "waiting_ns"), 49980000);
  for (size_t i = 0; i < 2; i++) {
    site = trow(rep, "wait_sites", i);
    assert_int_equal(num(site, "calls"), 3);
    assert_int_equal(num(site, "waiting_ns"), 150 * MS);
  }
}

static size_t rows_in(yajl_val rep, const char *key) {
  yajl_val t = get(rep, "ranks", "tables", key);
  const char *p[2] = {"rows", NULL};
  yajl_val rows = t ? yajl_tree_get(t, p, yajl_t_array) : NULL;
  return rows ? rows->u.array.len : 0;
}

/* merged.json is written as loom wrote MPI traces before the records carried
 * marks: the calls are understood by the MPI backend's role description. */
static void test_ranks_merged(void **state) {
  (void)state;
  yajl_val rep = report_of(DIR "merged.json", NULL, 0);
  check_ranks(rep);
  yajl_val cats = get(rep, "not_understood", "categories", NULL);
  assert_true(cats && YAJL_IS_ARRAY(cats));
  assert_int_equal(cats->u.array.len, 0); /* category "mpi" included */
  /* Rank 2 was late by itself: every wait's chain ends at it. */
  assert_int_equal(num(trow(rep, "ranks", 2), "root_caused_ns"), 349980000);
  assert_int_equal(rows_in(rep, "waits_for"), 3);
  yajl_tree_free(rep);
}

static void test_ranks_separate_files(void **state) {
  (void)state;
  const char *more[] = {DIR "rank1.json", DIR "rank2.json", DIR "rank3.json"};
  yajl_val rep = report_of(DIR "rank0.json", more, 3);
  check_ranks(rep);
  yajl_tree_free(rep);
}

/* Half the ranks: messages to and from the missing ones are counted as
 * unmatched, collectives are matched over the ranks present. */
static void test_ranks_missing_ranks(void **state) {
  (void)state;
  const char *more[] = {DIR "rank1.json"};
  yajl_val rep = report_of(DIR "rank0.json", more, 1);
  yajl_val k = get(rep, "ranks", NULL, NULL);
  assert_int_equal(num(k, "count"), 2);
  assert_int_equal(num(k, "messages"), 5);           /* 0 -> 1, once per step */
  assert_int_equal(num(k, "unmatched_sends"), 5);    /* 1 -> 2 */
  assert_int_equal(num(k, "unmatched_receives"), 5); /* 3 -> 0 */
  assert_int_equal(num(k, "collective_instances"), 10);
  for (size_t r = 0; r < 2; r++) /* ranks 0 and 1 enter everything together */
    assert_int_equal(num(trow(rep, "ranks", r), "waiting_ns"), 0);
  yajl_tree_free(rep);
}

/* rooted.json (gen.py), one step [0, 70 ms) on 3 ranks:
 *  MPI_Bcast root 0: rank 0 enters at 20, ranks 1, 2 at 10 and 15, all leave
 *  20.1: Late Broadcast 10 ms (rank 1) and 5 ms (rank 2), caused by rank 0;
 *  MPI_Reduce root 1 enters at 30, ranks 0, 2 at 34 and 37; it leaves 37.1:
 *  Early Reduce min(34, 37.1) - 30 = 4 ms on rank 1, caused by rank 0;
 *  MPI_Ssend 2 -> 0 [40, 47.1), MPI_Recv on 0 at 47: Late Receiver 7 ms on
 *  rank 2 (Late Sender 0: the send came first), caused by rank 0;
 *  MPI_Send 1 -> 2 [50, 50.01) and its Recv at 60: the send had returned
 *  (eager), so no Late Receiver, and no Late Sender. */
static void test_ranks_rooted_and_late_receiver(void **state) {
  (void)state;
  yajl_val rep = report_of(DIR "rooted.json", NULL, 0);
  yajl_val k = get(rep, "ranks", NULL, NULL);
  assert_int_equal(num(k, "count"), 3);
  assert_int_equal(num(k, "messages"), 2);
  assert_int_equal(num(k, "pace_rank"), 0);
  static const long long bcast[3] = {0, 10 * MS, 5 * MS}, reduce[3] = {0, 4 * MS, 0},
                         lr[3] = {0, 0, 7 * MS}, caused[3] = {26 * MS, 0, 0};
  for (size_t r = 0; r < 3; r++) {
    yajl_val row = trow(rep, "ranks", r);
    assert_int_equal(num(row, "late_broadcast_ns"), bcast[r]);
    assert_int_equal(num(row, "early_reduce_ns"), reduce[r]);
    assert_int_equal(num(row, "late_receiver_ns"), lr[r]);
    assert_int_equal(num(row, "late_sender_ns"), 0);
    assert_int_equal(num(row, "wait_nxn_ns") + num(row, "wait_barrier_ns"), 0);
    assert_int_equal(num(row, "caused_ns"), caused[r]);
  }
  assert_int_equal(num(trow(rep, "steps", 0), "straggler"), 0);
  yajl_tree_free(rep);
}

/* chain.json (gen.py): the MPI backend's records with their marks.  Step 1:
 * rank 3's Waitall [10.04, 60.07) waits for rank 2's Isend at 60.02: Late
 * Sender 49.98 ms, caused by rank 2.  Ranks 0 and 1 enter the allreduce at
 * 20, rank 2 at 60.14, rank 3 last at 60.17: Wait at N x N 40.17 ms on 0
 * and 1, caused by rank 3, 0.03 ms on rank 2 (noise: under 1 ms).  But rank
 * 3 was late because it waited for rank 2 until 60.02: of each 40.17 ms,
 * [20, 60.02) = 40.02 ms is rank 2's doing, [60.02, 60.17) = 0.15 ms rank
 * 3's.  Rank 2 is at the root of 49.98 + 2 x 40.02 = 130.02 ms, rank 3 of
 * 0.30 ms: rank 2 is the straggler.  Step 2: rank 0's MPI_Test [120,
 * 150.2) completes a receive whose send began at 150; a test does not wait:
 * no Late Sender. */
static void check_chain(yajl_val rep) {
  yajl_val k = get(rep, "ranks", NULL, NULL);
  assert_int_equal(num(k, "messages"), 5);
  assert_int_equal(num(k, "collective_instances"), 1);
  assert_int_equal(num(k, "pace_rank"), 2);
  assert_int_equal(num(k, "wait_threshold_ns"), 1000000);
  assert_int_equal(num(k, "waits_below_threshold"), 1);
  static const long long nxn[4] = {40170000, 40170000, 0, 0}, ls[4] = {0, 0, 0, 49980000},
                         caused[4] = {0, 0, 49980000, 80340000}, root[4] = {0, 0, 130020000, 300000},
                         noise[4] = {0, 0, 30000, 0};
  for (size_t r = 0; r < 4; r++) {
    yajl_val row = trow(rep, "ranks", r);
    assert_int_equal(num(row, "wait_nxn_ns"), nxn[r]);
    assert_int_equal(num(row, "late_sender_ns"), ls[r]);
    assert_int_equal(num(row, "caused_ns"), caused[r]);
    assert_int_equal(num(row, "root_caused_ns"), root[r]);
    assert_int_equal(num(row, "below_threshold_ns"), noise[r]);
    assert_int_equal(num(row, "straggler_steps"), r == 2);
  }
  assert_int_equal(num(trow(rep, "steps", 0), "straggler"), 2);
  const char *p[2] = {"straggler", NULL};
  yajl_val who = yajl_tree_get(trow(rep, "steps", 1), p, yajl_t_any);
  assert_true(who && YAJL_IS_NULL(who));
  /* who waited for whom, the most first */
  static const long long wf[5][4] = {{1, 3, 2, 49980000}, {1, 0, 2, 40020000}, {1, 1, 2, 40020000},
                                     {1, 0, 3, 150000}, {1, 1, 3, 150000}};
  assert_int_equal(rows_in(rep, "waits_for"), 5);
  for (size_t i = 0; i < 5; i++) {
    yajl_val row = trow(rep, "waits_for", i);
    assert_int_equal(num(row, "step"), wf[i][0]);
    assert_int_equal(num(row, "rank"), wf[i][1]);
    assert_int_equal(num(row, "waited_for"), wf[i][2]);
    assert_int_equal(num(row, "waiting_ns"), wf[i][3]);
  }
  yajl_val cats = get(rep, "not_understood", "categories", NULL);
  assert_true(cats && YAJL_IS_ARRAY(cats));
  assert_int_equal(cats->u.array.len, 0);
}

static void test_ranks_root_cause(void **state) {
  (void)state;
  yajl_val rep = report_of(DIR "chain.json", NULL, 0);
  check_chain(rep);
  yajl_tree_free(rep);
}

/* The marks survive loom's own formats: the same figures from a .pftrace
 * and a Chrome JSON that loom wrote from it (and "mpi" is understood in
 * both, the records' kinds coming from their marks). */
static void test_ranks_marks_round_trip(void **state) {
  (void)state;
  loom_trace *t = NULL;
  assert_int_equal(loom_trace_load(DIR "chain.json", &t), LOOM_OK);
  char pf[512], js[512];
  tmp_path(pf, sizeof pf, ".chain.pftrace");
  tmp_path(js, sizeof js, ".chain.json");
  assert_int_equal(loom_trace_save(t, pf), LOOM_OK);
  loom_trace_free(t);
  t = NULL;
  assert_int_equal(loom_trace_load(pf, &t), LOOM_OK);
  assert_int_equal(loom_trace_save(t, js), LOOM_OK);
  loom_trace_free(t);
  const char *paths[2] = {pf, js};
  for (int i = 0; i < 2; i++) {
    yajl_val rep = report_of(paths[i], NULL, 0);
    check_chain(rep);
    yajl_tree_free(rep);
    unlink(paths[i]);
  }
}

/* The threshold: every wait counts (< 0), or waits under 45 ms are noise,
 * and then rank 3's Late Sender is the only wait state, and rank 2 the root
 * of just that. */
static void test_ranks_wait_threshold(void **state) {
  (void)state;
  yajl_val rep = report_with(DIR "chain.json", NULL, 0, -1);
  assert_int_equal(num(get(rep, "ranks", NULL, NULL), "waits_below_threshold"), 0);
  assert_int_equal(num(trow(rep, "ranks", 2), "wait_nxn_ns"), 30000);
  assert_int_equal(num(trow(rep, "ranks", 2), "below_threshold_ns"), 0);
  yajl_tree_free(rep);
  rep = report_with(DIR "chain.json", NULL, 0, 45 * MS);
  assert_int_equal(num(get(rep, "ranks", NULL, NULL), "waits_below_threshold"), 3);
  static const long long wait[4] = {0, 0, 0, 49980000}, root[4] = {0, 0, 49980000, 0},
                         noise[4] = {40170000, 40170000, 30000, 0};
  for (size_t r = 0; r < 4; r++) {
    yajl_val row = trow(rep, "ranks", r);
    assert_int_equal(num(row, "waiting_ns"), wait[r]);
    assert_int_equal(num(row, "root_caused_ns"), root[r]);
    assert_int_equal(num(row, "below_threshold_ns"), noise[r]);
  }
  assert_int_equal(rows_in(rep, "waits_for"), 1);
  yajl_tree_free(rep);
}

/* The page's two rank x step heat maps: one cell per rank and step each,
 * rank 2's step 3 the darkest of the step-time map, no script. */
static void test_ranks_html_heat_maps(void **state) {
  (void)state;
  loom_report_options o = {.struct_size = sizeof o};
  loom_report *r = NULL;
  assert_int_equal(loom_report_open(DIR "merged.json", &o, &r), LOOM_OK);
  char out[512];
  tmp_path(out, sizeof out, ".ranks.html");
  assert_int_equal(loom_report_write(r, LOOM_REPORT_HTML, out), LOOM_OK);
  loom_report_free(r);
  size_t n, cells = 0;
  char *html = read_file(out, &n);
  unlink(out);
  assert_non_null(html);
  for (const char *p = html; (p = strstr(p, "<rect x=")); p++) cells++;
  assert_int_equal(cells, 2 * 4 * 5);
  assert_non_null(strstr(html, "darkest = 181.390 ms"));      /* rank 2, step 3 */
  assert_non_null(strstr(html, "darkest = 149.980 ms"));      /* rank 3 waits most */
  assert_non_null(strstr(html, "<title>rank 2, step 3: 181.390 ms</title>"));
  assert_null(strstr(html, "<script"));
  free(html);
}

/* One process, no rank: one rank, no cross-rank figures to speak of. */
static void test_ranks_single_trace(void **state) {
  (void)state;
  yajl_val rep = report_of(LOOM_TESTS_DIR "/data/report/synthetic.json", NULL, 0);
  yajl_val k = get(rep, "ranks", NULL, NULL);
  assert_int_equal(num(k, "count"), 1);
  assert_int_equal(num(k, "messages"), 0);
  assert_int_equal(num(trow(rep, "ranks", 0), "steps"), 2);
  yajl_tree_free(rep);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_ranks_merged), cmocka_unit_test(test_ranks_separate_files),
      cmocka_unit_test(test_ranks_missing_ranks), cmocka_unit_test(test_ranks_rooted_and_late_receiver),
      cmocka_unit_test(test_ranks_html_heat_maps), cmocka_unit_test(test_ranks_single_trace),
      cmocka_unit_test(test_ranks_root_cause), cmocka_unit_test(test_ranks_marks_round_trip),
      cmocka_unit_test(test_ranks_wait_threshold)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
