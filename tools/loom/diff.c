/*
 * diff.c - `loom diff BASE NEW`: what changed between two runs, through the
 * public API (loom_diff_*, loom.h): per name figures of both runs, names
 * that appear or disappear, and the changes a test across steps calls
 * regressions (docs/report.md, "loom diff").
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "loom/loom.h"
#include "spec.h"

/* The synopsis (spec.c) on stderr; 2, the status of a wrong command line. */
static int usage(void) {
  cli_usage(stderr, cli_command("diff"));
  return 2;
}

typedef struct diff_args {
  const char **base, **newer;
  size_t nbase, nnew;
  const char *out, *html;
  int json;
  loom_diff_options o;
} diff_args;

/* A number from v into *x (percent divided by 100 when pct); -1 when bad. */
static int num_arg(const char *opt, const char *v, double *x, int pct) {
  char *end;
  double d = strtod(v, &end);
  if (end == v || *end || !(d >= 0)) {
    fprintf(stderr, "loom diff: %s wants a number >= 0, not '%s'\n", opt, v);
    return -1;
  }
  *x = pct ? d / 100 : d;
  if (*x == 0) *x = -1; /* 0 asked for: no minimum (0 in the options means the default) */
  return 0;
}

static int step_arg(const char *v, int64_t *s) {
  char *end;
  long long n = strtoll(v, &end, 10);
  if (end == v || *end || n < 0) {
    fprintf(stderr, "loom diff: a step is a number >= 0 (ProfilerStep#N), not '%s'\n", v);
    return -1;
  }
  *s = n;
  return 0;
}

/* One option at argv[*i] into a; 1 when it was one, 0 when not, -1 bad. */
static int option(int argc, char **argv, int *i, diff_args *a) {
  const char *s = argv[*i], *v = *i + 1 < argc ? argv[*i + 1] : NULL;
  loom_diff_options *o = &a->o;
  if (!strcmp(s, "--json")) return a->json = 1;
  if (!strcmp(s, "--all")) return o->top = 0, 1;
  if (!v) return 0;
  ++*i;
  if (!strcmp(s, "-o")) a->out = v;
  else if (!strcmp(s, "--html")) a->html = v;
  else if (!strcmp(s, "--top")) o->top = strtoull(v, NULL, 10);
  else if (!strcmp(s, "--sort-memory")) o->sort_memory = strtoull(v, NULL, 10) << 20;
  else if (!strcmp(s, "--base")) a->base[a->nbase++] = v;
  else if (!strcmp(s, "--new")) a->newer[a->nnew++] = v;
  else if (!strcmp(s, "--alpha")) return num_arg(s, v, &o->alpha, 0) ? -1 : 1;
  else if (!strcmp(s, "--min-change")) return num_arg(s, v, &o->min_change, 1) ? -1 : 1;
  else if (!strcmp(s, "--min-share")) return num_arg(s, v, &o->min_share, 1) ? -1 : 1;
  else if (!strcmp(s, "--step")) {
    o->steps_set = 1;
    if (step_arg(v, &o->base_step)) return -1;
    o->new_step = o->base_step;
  } else if (!strcmp(s, "--steps") && *i + 1 < argc) {
    o->steps_set = 1;
    if (step_arg(v, &o->base_step) || step_arg(argv[++*i], &o->new_step)) return -1;
  } else {
    --*i;
    return 0;
  }
  return 1;
}

/* argv[2..] into a: two positional paths are BASE and NEW.  -1 when bad. */
static int parse(int argc, char **argv, diff_args *a) {
  const char **pos = calloc((size_t)argc, sizeof *pos);
  size_t npos = 0;
  if (!pos) return -1;
  for (int i = 2; i < argc; i++) {
    int r = option(argc, argv, &i, a);
    if (r < 0) return free(pos), -1;
    if (r) continue;
    if (argv[i][0] == '-' && argv[i][1]) {
      fprintf(stderr, "loom diff: unknown or incomplete option '%s'\n", argv[i]);
      return free(pos), -1;
    }
    pos[npos++] = argv[i];
  }
  if (npos == 2) a->base[a->nbase++] = pos[0], a->newer[a->nnew++] = pos[1];
  int ok = (npos == 2 || npos == 0) && a->nbase && a->nnew;
  free(pos);
  return ok ? 0 : -1;
}

static int run(const diff_args *a) {
  loom_diff *d;
  if (loom_diff_open(a->base, a->nbase, a->newer, a->nnew, &a->o, &d) != LOOM_OK) {
    fprintf(stderr, "loom diff: %s\n", loom_last_error());
    return 1;
  }
  int rc = 0;
  if (loom_diff_write(d, a->json ? LOOM_REPORT_JSON : LOOM_REPORT_TEXT, a->out) != LOOM_OK) {
    fprintf(stderr, "loom diff: %s\n", loom_last_error());
    rc = 1;
  }
  if (a->html && loom_diff_write(d, LOOM_REPORT_HTML, a->html) != LOOM_OK) {
    fprintf(stderr, "loom diff: %s\n", loom_last_error());
    rc = 1;
  } else if (a->html) {
    fprintf(stderr, "loom diff: wrote %s\n", a->html);
  }
  loom_diff_free(d);
  return rc;
}

int cmd_diff(int argc, char **argv) {
  diff_args a = {.o = {.struct_size = sizeof a.o, .top = 20}};
  a.base = calloc((size_t)argc, sizeof *a.base);
  a.newer = calloc((size_t)argc, sizeof *a.newer);
  int rc = 1;
  if (!a.base || !a.newer) fprintf(stderr, "loom diff: out of memory\n");
  else rc = parse(argc, argv, &a) ? usage() : run(&a);
  free(a.base);
  free(a.newer);
  return rc;
}
