/*
 * report.c - `loom report TRACE... [options]`: the report of a trace (or of
 * several, one rank each) through the public API (loom_report_*, loom.h)
 * as text, JSON and HTML (docs/report.md).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "loom/loom.h"
#include "spec.h"

/* loom report's command line. */
typedef struct report_args {
  const char *in, *out, *html; /* in: the first trace; NULL: nothing to do (usage) */
  int json;
  loom_report_options o;
} report_args;

/* --wait-threshold US into o.  0, or -1 after a message. */
static int report_wait_threshold(const char *v, loom_report_options *o) {
  char *end;
  double us = strtod(v, &end);
  if (end == v || *end || !(us >= 0) || us > 9e12) {
    fprintf(stderr, "loom report: --wait-threshold wants microseconds (a number >= 0), "
            "not '%s'\n", v);
    return -1;
  }
  o->wait_threshold_ns = us > 0 ? (int64_t)(us * 1000 + 0.5) : -1;
  if (!o->wait_threshold_ns) o->wait_threshold_ns = -1;
  return 0;
}

/* argv[2..] into a; the traces after the first go to more (room for argc).
 * A bad option is said and leaves a->in NULL. */
static void report_parse(int argc, char **argv, report_args *a, const char **more) {
  loom_report_options *o = &a->o;
  for (int i = 2; i < argc; i++) {
    const char *s = argv[i];
    int more_args = i + 1 < argc;
    if (!strcmp(s, "--json")) a->json = 1;
    else if (!strcmp(s, "--html") && more_args) a->html = argv[++i];
    else if (!strcmp(s, "-o") && more_args) a->out = argv[++i];
    else if (!strcmp(s, "--top") && more_args) o->top = strtoull(argv[++i], NULL, 10);
    else if (!strcmp(s, "--all")) o->top = 0;
    else if (!strcmp(s, "--sort-memory") && more_args)
      o->sort_memory = strtoull(argv[++i], NULL, 10) << 20;
    else if (!strcmp(s, "--include-last-step")) o->hta_include_last_step = 1;
    else if (!strcmp(s, "--no-critical-path")) o->no_critical_path = 1;
    else if (!strcmp(s, "--critical-path-trace") && more_args) o->critical_path_trace = argv[++i];
    else if (!strcmp(s, "--wait-threshold") && more_args) {
      if (report_wait_threshold(argv[++i], o) != 0) {
        a->in = NULL;
        return;
      }
    } else if (s[0] == '-' && s[1]) {
      fprintf(stderr, "loom report: unknown or incomplete option '%s'\n", s);
      a->in = NULL;
      return;
    } else if (!a->in) a->in = s;
    else more[o->nmore_traces++] = s;
  }
}

/* The report of a->in (and the ranks in a->o.more_traces) as text or JSON
 * (-o, else stdout) and HTML (--html).  0, or 1 after a message. */
static int report_write(const report_args *a) {
  loom_report *r;
  if (loom_report_open(a->in, &a->o, &r) != LOOM_OK) {
    fprintf(stderr, "loom report: %s\n", loom_last_error());
    return 1;
  }
  int rc = 0;
  if (loom_report_write(r, a->json ? LOOM_REPORT_JSON : LOOM_REPORT_TEXT, a->out) != LOOM_OK) {
    fprintf(stderr, "loom report: %s\n", loom_last_error());
    rc = 1;
  }
  if (a->html && loom_report_write(r, LOOM_REPORT_HTML, a->html) != LOOM_OK) {
    fprintf(stderr, "loom report: %s\n", loom_last_error());
    rc = 1;
  } else if (a->html) {
    fprintf(stderr, "loom report: wrote %s\n", a->html);
  }
  loom_report_free(r);
  return rc;
}

/* loom report TRACE... [--json] [-o FILE] [--html FILE] [--top N] ...
 * Several traces: one rank each, analysed across ranks (docs/report.md). */
int cmd_report(int argc, char **argv) {
  const char **more = calloc((size_t)argc, sizeof *more);
  if (!more) {
    fprintf(stderr, "loom report: out of memory\n");
    return 1;
  }
  report_args a = {.o = {.struct_size = sizeof a.o, .top = 20, .more_traces = more}};
  report_parse(argc, argv, &a, more);
  int rc = 2;
  if (!a.in)
    cli_usage(stderr, cli_command("report"));
  else
    rc = report_write(&a);
  free(more);
  return rc;
}
