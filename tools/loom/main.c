/*
 * loom - the command-line tool: version, backends, check-backend, record,
 * salvage, convert, report, merge, trigger.
 */
#include <limits.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "enable.h"
#include "loom/loom.h"
#include "loom/plugin.h"

const loom_tools *cli_tools(void) {
  static const loom_tools *t;
  if (!t && !(t = LOOM_TOOLS_GET())) {
    fprintf(stderr, "loom: %s\n", loom_last_error());
    exit(1);
  }
  return t;
}

static const char *state_name(loom_backend_state s) {
  switch (s) {
  case LOOM_BACKEND_AVAILABLE: return "available";
  case LOOM_BACKEND_UNAVAILABLE: return "unavailable";
  default: return "registered (not probed yet)";
  }
}

static void print_backend(const loom_backend_info *b, void *user) {
  (void)user;
  printf("%-12s device=%-8s %s%s%s\n    from %s\n    kinds:", b->name, b->device_type,
         state_name(b->state), b->reason[0] ? ": " : "", b->reason, b->origin);
  for (int k = 0; k < LOOM_KIND_COUNT_; k++)
    if (b->kinds & LOOM_KIND_BIT(k)) printf(" %s", loom_kind_name((loom_kind)k));
  printf("\n");
  enable_describe(stdout, b);
  /* ABI 1.3: the options it declares (--option NAME.KEY=V) */
  if (b->struct_size > offsetof(loom_backend_info, options) && b->options && b->options[0].key) {
    printf("    options:\n");
    for (const loom_option_desc *o = b->options; o->key; o++)
      printf("      %-26s %s\n", o->key, o->help ? o->help : "");
  }
}

/* Lists backends of every plug-in `loom record` would load (the installed
 * plug-in folder, LOOM_PLUGIN_PATH, LOOM_PLUGINS, --plugin); unless
 * --no-probe, probes them first by preparing (and discarding) a session over
 * every device type. */
static int cmd_backends(int argc, char **argv) {
  int probe = 1;
  char *extra[64];
  size_t nextra = 0;
  for (int i = 2; i < argc; i++) {
    if (!strcmp(argv[i], "--no-probe")) probe = 0;
    else if (!strcmp(argv[i], "--plugin") && i + 1 < argc && nextra < 64)
      extra[nextra++] = argv[++i];
    else {
      fprintf(stderr, "usage: loom backends [--no-probe] [--plugin PATH]...\n");
      return 2;
    }
  }
  setenv("LOOM_LOG", "error", 0); /* states are listed below, not as warnings */
  char libdir[PATH_MAX];
  plugin_set found = {0};
  int bad = plugins_discover(&found, tool_libdir(libdir, sizeof libdir) == 0 ? libdir : NULL,
                             extra, nextra, "loom backends");
  plugins_free(&found);
  if (probe) {
    loom_session_config cfg = {.struct_size = sizeof cfg, .devices = "all"};
    loom_session *s = NULL;
    if (loom_session_create(&cfg, &s) == LOOM_OK) loom_session_destroy(s);
    else fprintf(stderr, "loom: cannot probe backends: %s\n", loom_last_error());
  }
  size_t n = loom_backends_list(print_backend, NULL);
  if (!n)
    printf("no backends registered (plug-ins load from the installed plug-in folder, "
           "LOOM_PLUGINS=file.so:..., LOOM_PLUGIN_PATH=folder:... or --plugin PATH)\n");
  return bad ? 1 : 0;
}

/* loom convert IN OUT: any format loom reads to any it writes. */
static int cmd_convert(int argc, char **argv) {
  if (argc != 4) {
    fprintf(stderr,
            "usage: loom convert IN OUT   (OUT: .json, .json.gz, .pftrace or .pftrace.gz)\n");
    return 2;
  }
  loom_trace *t;
  if (loom_trace_load(argv[2], &t) != LOOM_OK) {
    fprintf(stderr, "loom: %s\n", loom_last_error());
    return 1;
  }
  /* What the input says about itself, the reader's bad values among it
   * (they travel into OUT as its warnings). */
  size_t nw = loom_trace_warning_count(t);
  for (size_t i = 0; i < nw && i < 20; i++)
    fprintf(stderr, "loom: warning: %s\n", loom_trace_warning(t, i));
  if (nw > 20) fprintf(stderr, "loom: ... and %zu more warnings (in %s)\n", nw - 20, argv[3]);
  loom_status st = loom_trace_save(t, argv[3]);
  if (st != LOOM_OK) {
    fprintf(stderr, "loom: %s\n", loom_last_error());
    loom_trace_free(t);
    return 1;
  }
  loom_trace_summary s = {.struct_size = sizeof s};
  loom_trace_summarize(t, &s);
  printf("%s -> %s: %llu events, %llu flows, %llu devices\n", argv[2], argv[3],
         (unsigned long long)s.events, (unsigned long long)s.flows, (unsigned long long)s.devices);
  loom_trace_free(t);
  return 0;
}

int cmd_record(int argc, char **argv);        /* record.c */
int cmd_check_backend(int argc, char **argv); /* check.c */
int cmd_merge(int argc, char **argv);         /* merge.c */
int cmd_diff(int argc, char **argv);          /* diff.c */
int cmd_trigger(int argc, char **argv);       /* trigger.c */
int cmd_salvage(int argc, char **argv);       /* salvage.c */

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
static int cmd_report(int argc, char **argv) {
  const char **more = calloc((size_t)argc, sizeof *more);
  if (!more) {
    fprintf(stderr, "loom report: out of memory\n");
    return 1;
  }
  report_args a = {.o = {.struct_size = sizeof a.o, .top = 20, .more_traces = more}};
  report_parse(argc, argv, &a, more);
  int rc = 2;
  if (!a.in)
    fprintf(stderr, "usage: loom report TRACE... [--json] [-o FILE] [--html FILE] "
            "[--top N | --all]\n"
            "                   [--sort-memory MB] [--include-last-step] [--wait-threshold US]\n"
            "                   [--no-critical-path] [--critical-path-trace OUT]\n"
            "  several traces: one rank each, compared across ranks\n");
  else
    rc = report_write(&a);
  free(more);
  return rc;
}

static void usage(FILE *f) {
  fprintf(f, "usage: loom <command>\n"
             "  version      print loom's version\n"
             "  record [-o FILE] [--devices LIST] [--duration SEC] -- PROGRAM ARGS...\n"
             "               run a program with loom injected and write its trace\n"
             "  salvage [DIR] -o OUT\n"
             "               write the records loom record kept when it could not write\n"
             "               its trace (it prints the command)\n"
             "  convert IN OUT\n"
             "               convert a trace (Chrome/Kineto JSON, .json.gz, .pftrace, "
             ".pftrace.gz)\n"
             "  report TRACE... [--json] [-o FILE] [--html FILE] [--top N | --all]\n"
             "               analyse a trace: devices, kernels, transfers, launch latency,\n"
             "               overlap, host ops, user ranges, steps, CPU samples, HTA's figures,\n"
             "               the critical path and bound of every step\n"
             "  diff BASE NEW [--json] [-o FILE] [--html FILE] [--step N]\n"
             "               what changed between two runs: per name, step and rank, with\n"
             "               the regressions a test across steps finds\n"
             "  backends [--no-probe] [--plugin PATH]...\n"
             "               list the backends of every plug-in found, probed, with their\n"
             "               state and what loom record sets up for them\n"
             "  merge TRACE... -o OUT [--sort-memory MB] [--no-align]\n"
             "               one timeline from several processes' or ranks' traces\n"
             "  trigger PID [--duration SEC | --steps K] [-o FILE] [--config FILE|TEXT]\n"
             "  trigger --list\n"
             "               ask a process recording under loom record for a window now,\n"
             "               or list the processes that accept triggers\n"
             "  check-backend PLUGIN.so\n"
             "               check a plug-in the way loom uses it and print what to fix\n");
}

int main(int argc, char **argv) {
  if (argc < 2) {
    usage(stderr);
    return 2;
  }
  if (!strcmp(argv[1], "version") || !strcmp(argv[1], "--version")) {
    printf("loom %s\n", loom_version_string());
    return 0;
  }
  if (!strcmp(argv[1], "backends")) return cmd_backends(argc, argv);
  if (!strcmp(argv[1], "convert")) return cmd_convert(argc, argv);
  if (!strcmp(argv[1], "report")) return cmd_report(argc, argv);
  if (!strcmp(argv[1], "merge")) return cmd_merge(argc, argv);
  if (!strcmp(argv[1], "diff")) return cmd_diff(argc, argv);
  /* these reach the library's insides: checked before anything is done */
  if (!strcmp(argv[1], "record")) return cli_tools(), cmd_record(argc, argv);
  if (!strcmp(argv[1], "check-backend")) return cli_tools(), cmd_check_backend(argc, argv);
  if (!strcmp(argv[1], "trigger")) return cli_tools(), cmd_trigger(argc, argv);
  if (!strcmp(argv[1], "salvage")) return cli_tools(), cmd_salvage(argc, argv);
  if (!strcmp(argv[1], "help") || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
    usage(stdout);
    return 0;
  }
  fprintf(stderr, "loom: unknown command '%s'\n", argv[1]);
  usage(stderr);
  return 2;
}
