/*
 * diff.h - `loom diff`: two runs compared name by name (docs/report.md,
 * "loom diff").  Each input of a run (a trace, or one trace per rank) goes
 * through the report's streaming pass (analyze.c) with an item callback:
 * every closed host frame and every device work item lands in the run's
 * per-name figures (count, total, self time, quantiles of durations) and,
 * per step, in a cell of (name, step) -> time.  Once both runs are read,
 * every name of either run becomes a row: the figures of both, their
 * differences, and Mann-Whitney's U test of the name's per-step times in
 * one run against the other's, so that a name is called slower or faster
 * only when the steps say so beyond their own spread.  Memory: the report's
 * per input (freed before the next), plus the names (at most 128 KiB each
 * for their quantiles) and at most LOOM__DIFF_MAX_CELLS cells per run.
 */
#ifndef LOOM_DIFF_H
#define LOOM_DIFF_H

#include <stdint.h>

#include "analysis.h"
#include "table.h"

/* Groups of names in a diff: the report's, with synchronisation calls
 * (waits) apart from other runtime calls. */
enum { LOOM__DG_KERNEL, LOOM__DG_COPY, LOOM__DG_FILL, LOOM__DG_OP, LOOM__DG_RANGE, LOOM__DG_CALL,
       LOOM__DG_WAIT, LOOM__DG_COUNT_ };

/* (name, step) cells kept per run: past this many, names that would need
 * another are tested by occurrence instead (their "partial" mark). */
#define LOOM__DIFF_MAX_CELLS (1u << 20)
/* Both runs need this many steps for the test to be across steps. */
#define LOOM__DIFF_MIN_STEPS 5

/* The figures of one name in one run. */
typedef struct loom__dent {
  uint32_t sid;        /* name in loom__diff.strs */
  uint8_t group;       /* LOOM__DG_* */
  uint8_t partial;     /* some per-step cells were not kept */
  uint64_t count;
  int64_t total;       /* of durations */
  int64_t measure;     /* of what the test compares: self time for ops and ranges, else dur */
  loom__qs q;          /* durations */
  loom__qs qm;         /* self times (ops and ranges only) */
  int64_t *cell;       /* per-step measure totals of the steps it ran in (built at the end) */
  size_t ncell;
} loom__dent;

typedef struct loom__dstep {
  uint32_t rank;       /* index of its input in the run */
  uint32_t name;       /* in loom__diff.strs */
  uint64_t global;     /* its index among every input's steps (the cells' key) */
  int64_t dur;
} loom__dstep;

typedef struct loom__drank {
  uint32_t path;       /* in loom__diff.strs */
  int64_t rank;        /* the trace's "rank" metadata, else its place among the inputs */
  uint64_t events;
  size_t steps;
  int64_t span, step_time, work; /* work: device work's total time */
} loom__drank;

typedef struct loom__dside { /* one run */
  loom__dent *e;
  size_t n, cap;
  loom__map of;        /* group << 32 | sid -> index + 1 */
  loom__map cells;     /* index << 32 | global step -> measure total */
  int cells_full;
  loom__dstep *steps;  /* the steps compared (every step, or the one asked for) */
  size_t nsteps, cap_steps;
  loom__drank *ranks;
  size_t nranks, cap_ranks;
  uint64_t events;
  int64_t run_time;    /* the steps' time when there are steps, else the spans' */
  size_t nglobal;      /* global step indexes given out (every input's steps) */
} loom__dside;

enum { LOOM__DT_NONE, LOOM__DT_STEPS, LOOM__DT_OCCURRENCES };

typedef struct loom__drow {  /* a name of either run */
  uint8_t group;
  uint32_t sid;
  int32_t e[2];        /* its entry in base and new, -1 when absent */
  int64_t added;       /* new measure - base measure (new scaled to base's step count) */
  double change_pct;   /* added / base measure; NAN when base has none */
  double med[2];       /* typical measure: interquartile mean per step (by
                          occurrence: the median occurrence) */
  double p;            /* Holm-adjusted p of the test; NAN: not tested */
  int basis;           /* LOOM__DT_* */
  int verdict;         /* 1 slower, -1 faster, 0 neither */
} loom__drow;

typedef struct loom__diff_opts {
  size_t sort_budget;  /* per input; 0 = the report's default */
  int steps_set;       /* compare only the steps numbered step[0] and step[1] */
  int64_t step[2];
  double alpha;        /* family-wise error rate of the tests; 0 = 0.01 */
  double min_change;   /* fraction of the name's base time; 0 = 0.10, < 0 = none */
  double min_share;    /* fraction of base's run time; 0 = 0.01, < 0 = none */
} loom__diff_opts;

typedef struct loom__diff {
  loom__strtab strs;
  loom__dside side[2]; /* base, new */
  loom__drow *rows;
  size_t nrows;
  loom__diff_opts o;
  int basis;           /* LOOM__DT_STEPS when both runs have enough steps */
  size_t tested;       /* names tested (the Holm family) */
  double step_p;       /* step times: U test p, NAN when not tested */
  double step_iqm;     /* base's typical step: interquartile mean of its step times */
} loom__diff;

/* Reads both runs (each a list of traces or folders of them, one rank per
 * trace) and compares them.  Errors as loom__analyze, with the path. */
loom_status loom__diff_run(const char *const *base, size_t nbase, const char *const *newer,
                           size_t nnew, const loom__diff_opts *o, loom__diff **out);
void loom__diff_free(loom__diff *d);

/* diff_calc.c: the rows, their tests and verdicts, once both runs are in. */
int loom__diff_rows(loom__diff *d);
const char *loom__diff_group_name(int group);

/* Mann-Whitney's U test, two-sided, of x against y: each a list of values
 * in ascending order with their counts.  Exact when there are no ties and
 * at most 50 values in all, else the normal approximation with tie and
 * continuity corrections.  *u gets U of x.  NAN when either is empty. */
typedef struct loom__wv {
  double v;
  uint64_t c;
} loom__wv;
double loom__mwu(const loom__wv *x, size_t nx, const loom__wv *y, size_t ny, double *u);

/* diff_tables.c: the diff as tables of the report model (table.h). */
void loom__diff_model(const loom__diff *d, size_t top, loom__model *m);

#endif
