/*
 * spec.c - loom's command line described once (spec.h): the commands, their
 * arguments, options and defaults, exit status and examples.  `--help`, the
 * man pages and the bash completion are rendered from these tables (help.c,
 * man.c, complete.c); a parser that accepts an option not listed here, or a
 * listed one it does not accept, fails ctest cli_help_options.
 */
#include <stddef.h>
#include <string.h>

#include "spec.h"

#define END {NULL, NULL, CLI_V_NONE, NULL, NULL, NULL}
#define GROUP(text) {NULL, NULL, CLI_V_NONE, NULL, text, NULL}

#define TRACE_EXTS ".json, .json.gz, .pftrace or .pftrace.gz"

/* ---- loom ------------------------------------------------------------------ */
static const char *const loom_syn[] = {"COMMAND [ARGUMENTS]", "--version",
                                       "help [COMMAND]", NULL};
static const cli_opt loom_opts[] = {
    {"--version", NULL, CLI_V_NONE, NULL, "print loom's version and exit", NULL},
    END};
static const char *const loom_ex[] = {
    "loom record -o trace.json -- ./app args", "record a program and everything it starts",
    "loom report trace.json", "analyse the trace",
    "loom backends", "list the backends found and what loom record sets up for them", NULL};

/* ---- record ---------------------------------------------------------------- */
static const char *const record_syn[] = {
    "record [-o FILE|DIR/] [--follow MODE] [--devices LIST] [--memory host]",
    "       [--option KEY=VALUE]... [--plugin PATH]... [window options]",
    "       [--ring SIZE [--slow-step K]] [--] PROGRAM [ARGS...]", NULL};
static const cli_opt record_args[] = {
    {"PROGRAM", NULL, CLI_V_PROGRAM, NULL,
     "the program to run, unmodified, found on PATH as a shell would; the options end at the "
     "first argument that is not an option, or at --", NULL},
    {"ARGS...", NULL, CLI_V_FILE, NULL, "its arguments, passed as they are", "none"},
    END};
static const cli_opt record_opts[] = {
    {"-o", "FILE|DIR/", CLI_V_TRACE_OUT, NULL,
     "the trace to write (" TRACE_EXTS "), every process merged into it.  With windows, a "
     "pattern: {pid} {rank} {seq} {program}; without {seq}, several windows write "
     "FILE-<seq>.EXT.  A name ending with '/' is a folder: one trace per process, "
     "DIR/PROGRAM-PID[-rankR].json", "loom-PROGRAM.json"},
    {"--follow", "MODE", CLI_V_WORDS, "all exec none",
     "the processes to record: all (also children forked without exec), exec (those that "
     "exec'ed), none (PROGRAM only)", "all"},
    {"--devices", "LIST", CLI_V_DEVICES, NULL,
     "the device types to record, comma-separated, or all (loom backends shows the types)",
     "cpu and each plug-in's type that asks to be recorded by default where its runtime is "
     "installed"},
    {"--memory", "host", CLI_V_WORDS, "host",
     "also record the program's heap: every malloc, calloc, realloc, free... (device type "
     "heap; the program runs with libloom-heap.so preloaded; docs/heap.md).  Device memory "
     "comes with its runtime's backend", "off"},
    {"--option", "KEY=VALUE", CLI_V_OPTION, NULL,
     "a session option, or NAME.KEY=VALUE for backend NAME (loom backends lists them), or "
     "meta.KEY=VALUE for the trace's metadata; repeatable", "none"},
    {"--plugin", "PATH", CLI_V_PLUGIN, NULL,
     "load this plug-in too; repeatable.  The installed ones, LOOM_PLUGIN_PATH folders and "
     "LOOM_PLUGINS files always load", "none"},
    GROUP("window options (docs/triggers.md): record only part of the run"),
    {"--start-step", "N", CLI_V_TEXT, NULL,
     "with --steps K: steps N..N+K-1 (loom_step, PyTorch's ProfilerStep#N)", "the next step"},
    {"--steps", "K", CLI_V_TEXT, NULL, "a window of K steps", "off: the whole run"},
    {"--delay", "SEC", CLI_V_TEXT, NULL, "begin the window SEC seconds after the start", "0"},
    {"--duration", "SEC", CLI_V_TEXT, NULL, "stop the window after SEC seconds",
     "off: until the program ends"},
    {"--wait", "W", CLI_V_TEXT, NULL,
     "torch.profiler's schedule (with --warmup, --active, --repeat, --skip-first): W steps "
     "recorded by nobody at the start of each cycle", "0"},
    {"--warmup", "U", CLI_V_TEXT, NULL, "warmup steps of each cycle (not written)", "0"},
    {"--active", "A", CLI_V_TEXT, NULL,
     "steps recorded in each cycle, a file per cycle; a schedule needs it", "off: no schedule"},
    {"--repeat", "R", CLI_V_TEXT, NULL, "cycles of the schedule; 0: until the program ends",
     "0"},
    {"--skip-first", "S", CLI_V_TEXT, NULL, "steps skipped before the first cycle", "0"},
    {"--on-demand", NULL, CLI_V_NONE, NULL,
     "record nothing until loom trigger PID asks for a window (session option windows=on); "
     "with --ring: record, and each trigger dumps the ring", "off"},
    GROUP("flight recorder (docs/ring.md): keep only the most recent records"),
    {"--ring", "SIZE", CLI_V_TEXT, NULL,
     "keep host records within SIZE (suffix k, m, g), each backend's too; the trace at the "
     "end holds the last window", "off: keep everything"},
    {"--slow-step", "K", CLI_V_TEXT, NULL,
     "with --ring: a step K times slower than the running median dumps the ring (a file per "
     "dump, as windows)", "off"},
    END};
static const char *const record_ex[] = {
    "loom record -o trace.json -- ./app args", "record ./app and every process it starts",
    "loom record -o out/ --follow exec -- mpirun -n 4 ./train", "one trace per process",
    "loom record --start-step 100 --steps 3 -o t.json -- python train.py",
    "steps 100 to 102 only",
    "loom record --ring 64m --slow-step 3 -- ./train", "keep the last 64 MiB, dump slow steps",
    NULL};

/* ---- salvage --------------------------------------------------------------- */
static const char *const salvage_syn[] = {"salvage [DIR] -o OUT", NULL};
static const cli_opt salvage_args[] = {
    {"DIR", NULL, CLI_V_DIR, NULL, "the folder loom record named when it kept its records",
     "your newest loom-kept-* folder in $LOOM_SHM_DIR or /dev/shm, or $TMPDIR or /tmp"},
    END};
static const cli_opt salvage_opts[] = {
    {"-o", "OUT", CLI_V_TRACE_OUT, NULL,
     "a trace (" TRACE_EXTS "): every process merged; OUT/ (ends with '/'): one trace per "
     "process", "none, required"},
    END};

/* ---- convert --------------------------------------------------------------- */
static const char *const convert_syn[] = {"convert IN OUT", NULL};
static const cli_opt convert_args[] = {
    {"IN", NULL, CLI_V_TRACE, NULL,
     "a trace loom reads: Chrome or Kineto JSON, .json.gz, .pftrace, .pftrace.gz", NULL},
    {"OUT", NULL, CLI_V_TRACE_OUT, NULL, "the trace to write: " TRACE_EXTS, NULL},
    END};

/* ---- report ---------------------------------------------------------------- */
static const char *const report_syn[] = {
    "report TRACE... [--json] [-o FILE] [--html FILE] [--top N | --all]",
    "       [--sort-memory MB] [--include-last-step] [--wait-threshold US]",
    "       [--no-critical-path] [--critical-path-trace OUT]", NULL};
static const cli_opt report_args[] = {
    {"TRACE...", NULL, CLI_V_TRACE, NULL,
     "the trace to analyse; several traces: one rank each, compared across ranks", NULL},
    END};
static const cli_opt report_opts[] = {
    {"--json", NULL, CLI_V_NONE, NULL, "the report as JSON instead of text tables", "off"},
    {"-o", "FILE", CLI_V_FILE, NULL, "write the report to FILE", "standard output"},
    {"--html", "FILE", CLI_V_FILE, NULL, "also write one self-contained HTML page with charts",
     "off"},
    {"--top", "N", CLI_V_TEXT, NULL, "rows per table", "20"},
    {"--all", NULL, CLI_V_NONE, NULL, "every row of every table (--top 0)", "off"},
    {"--sort-memory", "MB", CLI_V_TEXT, NULL,
     "MiB of records sorted in memory before they spill to a temporary file", "256"},
    {"--include-last-step", NULL, CLI_V_NONE, NULL,
     "keep the last ProfilerStep in HTA's figures (HTA leaves it out)", "off"},
    {"--wait-threshold", "US", CLI_V_TEXT, NULL,
     "waits shorter than US microseconds are noise, not wait states; 0: every wait counts",
     "1000"},
    {"--no-critical-path", NULL, CLI_V_NONE, NULL,
     "leave out the critical path of every step and its bound", "off"},
    {"--critical-path-trace", "OUT", CLI_V_TRACE_OUT, NULL,
     "also write the trace with the critical paths marked (Chrome JSON), for Perfetto", "off"},
    END};
static const char *const report_ex[] = {
    "loom report trace.json", "text tables on standard output",
    "loom report --json -o r.json --html r.html trace.json.gz", "JSON and an HTML page",
    "loom report rank0.json rank1.json", "two ranks, compared", NULL};

/* ---- diff ------------------------------------------------------------------ */
static const char *const diff_syn[] = {
    "diff BASE NEW [--json] [-o FILE] [--html FILE] [--top N | --all]",
    "       [--step N | --steps B N] [--alpha A] [--min-change PCT] [--min-share PCT]",
    "       [--sort-memory MB] [--base PATH]... [--new PATH]...", NULL};
static const cli_opt diff_args[] = {
    {"BASE", NULL, CLI_V_TRACE, NULL, "the run before: a trace, or a folder of traces (one per "
     "rank)", NULL},
    {"NEW", NULL, CLI_V_TRACE, NULL, "the run after, as BASE", NULL},
    END};
static const cli_opt diff_opts[] = {
    {"--json", NULL, CLI_V_NONE, NULL, "the comparison as JSON instead of text tables", "off"},
    {"-o", "FILE", CLI_V_FILE, NULL, "write the comparison to FILE", "standard output"},
    {"--html", "FILE", CLI_V_FILE, NULL, "also write one HTML page", "off"},
    {"--top", "N", CLI_V_TEXT, NULL, "rows per table", "20"},
    {"--all", NULL, CLI_V_NONE, NULL, "every row of every table (--top 0)", "off"},
    {"--step", "N", CLI_V_TEXT, NULL, "compare ProfilerStep#N of both runs",
     "every step"},
    {"--steps", "B N", CLI_V_TEXT, NULL, "compare step B of the base with step N of the new run",
     "every step"},
    {"--alpha", "A", CLI_V_TEXT, NULL,
     "family-wise error rate of Mann-Whitney's U tests across steps (Holm's correction)",
     "0.01"},
    {"--min-change", "PCT", CLI_V_TEXT, NULL,
     "a change smaller than PCT % of the name's base time is no regression; 0: no minimum",
     "10"},
    {"--min-share", "PCT", CLI_V_TEXT, NULL,
     "a name under PCT % of the base run's time is no regression; 0: no minimum", "1"},
    {"--sort-memory", "MB", CLI_V_TEXT, NULL, "MiB of records sorted in memory per trace",
     "256"},
    {"--base", "PATH", CLI_V_TRACE, NULL, "one more trace or folder of the base run; "
     "repeatable (instead of BASE and NEW)", "none"},
    {"--new", "PATH", CLI_V_TRACE, NULL, "one more trace or folder of the new run; repeatable",
     "none"},
    END};
static const char *const diff_ex[] = {
    "loom diff yesterday.json.gz today.json.gz", "what changed, per name",
    "loom diff --step 5 --html d.html base/ new/", "step 5 of two multi-rank runs", NULL};

/* ---- backends -------------------------------------------------------------- */
static const char *const backends_syn[] = {"backends [--no-probe] [--plugin PATH]...", NULL};
static const cli_opt backends_opts[] = {
    {"--no-probe", NULL, CLI_V_NONE, NULL,
     "list the backends without probing them (no runtime is initialised)", "off: probe"},
    {"--plugin", "PATH", CLI_V_PLUGIN, NULL, "load this plug-in too; repeatable", "none"},
    END};

/* ---- merge ----------------------------------------------------------------- */
static const char *const merge_syn[] = {"merge TRACE... -o OUT [--sort-memory SIZE] [--no-align]",
                                        NULL};
static const cli_opt merge_args[] = {
    {"TRACE...", NULL, CLI_V_TRACE, NULL, "the traces of the processes or ranks", NULL}, END};
static const cli_opt merge_opts[] = {
    {"-o", "OUT", CLI_V_TRACE_OUT, NULL,
     "the merged trace: " TRACE_EXTS "; one process group per rank", "none, required"},
    {"--sort-memory", "SIZE", CLI_V_TEXT, NULL,
     "memory for the sort (at least 1m; k, m, g suffixes; a plain number is MiB); beyond it, "
     "sorted runs go to temporary files in $TMPDIR", "256m"},
    {"--no-align", NULL, CLI_V_NONE, NULL,
     "keep each trace's clock (by default clocks are aligned from the traces' clock_sync "
     "points)", "off: align"},
    END};

/* ---- trigger --------------------------------------------------------------- */
static const char *const trigger_syn[] = {
    "trigger PID [--duration SEC | --steps K [--start-step N]] [--delay SEC]",
    "       [-o FILE] [--config FILE|TEXT] [--no-wait]", "trigger --list", NULL};
static const cli_opt trigger_args[] = {
    {"PID", NULL, CLI_V_PID, NULL,
     "a process recording under loom record (or a program whose session has on_demand=on)",
     NULL},
    END};
static const cli_opt trigger_opts[] = {
    {"--duration", "SEC", CLI_V_TEXT, NULL,
     "a window of SEC seconds, from now (or after --delay); a process in ring mode dumps its "
     "last SEC seconds", "none: a process in ring mode dumps its whole ring; any other needs "
     "--duration, --steps or --config"},
    {"--steps", "K", CLI_V_TEXT, NULL, "a window of K steps, from the next step", "off"},
    {"--start-step", "N", CLI_V_TEXT, NULL, "with --steps: the window starts at step N",
     "the next step"},
    {"--delay", "SEC", CLI_V_TEXT, NULL, "begin the window SEC seconds from now", "0"},
    {"-o", "FILE", CLI_V_TRACE_OUT, NULL, "where the window goes",
     "the recording's -o pattern"},
    {"--config", "FILE|TEXT", CLI_V_FILE, NULL,
     "Kineto's on-demand keys (ACTIVITIES_DURATION_MSECS, ACTIVITIES_ITERATIONS, "
     "PROFILE_START_ITERATION[_ROUNDUP], ACTIVITIES_WARMUP_ITERATIONS, ACTIVITIES_LOG_FILE, "
     "ACTIVITY_TYPES) from file FILE, or TEXT itself: 'K=V\\nK=V'", "none"},
    {"--no-wait", NULL, CLI_V_NONE, NULL, "return once the window is armed",
     "off: wait for the window to end"},
    {"--list", NULL, CLI_V_NONE, NULL,
     "list the processes that accept triggers, with their state", NULL},
    END};

/* ---- check-backend --------------------------------------------------------- */
static const char *const check_syn[] = {"check-backend [--expect-records] PLUGIN.so", NULL};
static const cli_opt check_args[] = {
    {"PLUGIN.so", NULL, CLI_V_PLUGIN, NULL, "the plug-in to check", NULL}, END};
static const cli_opt check_opts[] = {
    {"--expect-records", NULL, CLI_V_NONE, NULL, "an idle session must emit records", "off"},
    END};

/* ---- version, help --------------------------------------------------------- */
static const char *const version_syn[] = {"version", NULL};
static const char *const help_syn[] = {"help [COMMAND]", NULL};
static const cli_opt help_args[] = {
    {"COMMAND", NULL, CLI_V_COMMAND, NULL, "the command whose help to print",
     "loom's own help"},
    END};

/* ---- the commands ------------------------------------------------------------ */
const cli_cmd cli_commands[] = {
    {"loom", "a vendor-neutral activity profiler", loom_syn,
     "loom records what a program does on its CPUs and on every accelerator a backend "
     "(plug-in) knows, into one trace that Perfetto, chrome://tracing, TensorBoard and HTA "
     "read, and analyses it.\n"
     "Each command has its own page (loom-COMMAND(1)) and help (loom COMMAND --help).",
     NULL, loom_opts, "0 on success, 2 for a wrong command line, else the command's.", loom_ex,
     "the loom-COMMAND(1) pages; README.md and docs/ in loom's source"},
    {"record", "run a program with loom injected and write its trace", record_syn,
     "Runs an unmodified program with loom injected (loom-preload.so through LD_PRELOAD) and "
     "the plug-ins of the devices it records enabled, and writes its trace when it ends.  "
     "Every process the "
     "program starts records too (--follow), and a summary is printed.\n"
     "SIGINT, SIGTERM and SIGHUP are passed on to the program.  The output is checked "
     "before the program starts.",
     record_args, record_opts,
     "the program's (or 128 plus the signal that ended it); 74 when it succeeded but its "
     "trace could not be written: every record is kept, and the command loom salvage DIR -o "
     "OUT that writes them is printed; 2 for a wrong command line.", record_ex,
     "loom-salvage(1), loom-trigger(1), loom-backends(1), docs/triggers.md, docs/ring.md"},
    {"salvage", "write the records loom record kept when it could not write its trace",
     salvage_syn,
     "Writes the records that a loom record run kept because its trace could not be written "
     "(disk full, no permission, a failed merge) to OUT, as the run would have.  The kept "
     "folder is removed once OUT is written; on any failure everything stays and the reason "
     "is printed.",
     salvage_args, salvage_opts, "0 when OUT was written, 1 when not, 2 for a wrong command line.",
     NULL, "loom-record(1), docs/survival.md"},
    {"convert", "convert a trace from any format loom reads to any it writes", convert_syn,
     "Reads IN and writes OUT in the format its name says, with the warnings of the input "
     "printed and kept in OUT; prints the events, flows and devices written.",
     convert_args, NULL, "0 when OUT was written, 1 when not, 2 for a wrong command line.",
     NULL, "loom-merge(1), docs/formats.md"},
    {"report", "analyse a trace", report_syn,
     "Analyses a trace: devices, kernels, transfers, launch latency, overlap, host ops, user "
     "ranges, steps, CPU samples, memory, HTA's figures, the critical path and bound of every "
     "step; with several traces, one rank each, the figures across ranks.",
     report_args, report_opts, "0 on success, 1 when a trace cannot be read or the report "
     "written, 2 for a wrong command line.", report_ex, "loom-diff(1), docs/report.md"},
    {"diff", "what changed between two runs", diff_syn,
     "Compares two runs per name, step and rank: the figures of both, names that appear or "
     "disappear, and the changes a test across steps calls regressions.  A name is slower or "
     "faster when Mann-Whitney's U test across steps says so (after Holm's correction) and "
     "the change is at least --min-change of its base time and --min-share of the base "
     "run's time.",
     diff_args, diff_opts, "0 on success, 1 when a run cannot be read or the result written, "
     "2 for a wrong command line.", diff_ex, "loom-report(1), docs/report.md"},
    {"backends", "list the backends of every plug-in found", backends_syn,
     "Lists the backends of every plug-in loom record would load (the installed plug-in "
     "folder, LOOM_PLUGIN_PATH, LOOM_PLUGINS, --plugin), with their device type, state, the "
     "kinds of records they make, what loom record sets up for them and the options they "
     "take; probed first unless --no-probe.",
     NULL, backends_opts, "0, or 1 when a plug-in could not be loaded, 2 for a wrong command "
     "line.", NULL, "loom-check-backend(1), docs/writing-a-backend.md"},
    {"merge", "one timeline from several processes' or ranks' traces", merge_syn,
     "Merges the traces of several processes or ranks into one timeline: one process group "
     "per rank, clocks aligned from the traces' clock_sync points, messages as flows, sorted "
     "within a memory budget.",
     merge_args, merge_opts, "0 when OUT was written, 1 when not, 2 for a wrong command line.",
     NULL, "loom-convert(1), docs/multirank.md"},
    {"trigger", "ask a recording process for a window now", trigger_syn,
     "Asks process PID for one window, written to its own file; waits for the window to end "
     "and prints the file.  A process in ring mode dumps its ring now instead.  With --list, "
     "lists the processes that accept triggers.",
     trigger_args, trigger_opts, "0 when the window was written (or armed, with --no-wait), "
     "1 when the process refused or could not be reached, 2 for a wrong command line.", NULL,
     "loom-record(1), docs/triggers.md"},
    {"check-backend", "check a plug-in the way loom uses it", check_syn,
     "Checks a plug-in's table, enable description, probe and a short session, and prints "
     "what to fix.",
     check_args, check_opts, "0 when the plug-in passed, 1 on any error, 2 for a wrong "
     "command line.", NULL, "loom-backends(1), docs/writing-a-backend.md"},
    {"version", "print loom's version", version_syn, "Prints loom's version.", NULL, NULL,
     "0.", NULL, "loom(1)"},
    {"help", "print the help of loom or of a command", help_syn,
     "Prints the help of COMMAND, as loom COMMAND --help does.", help_args, NULL,
     "0, or 2 for an unknown command.", NULL, "loom(1)"},
    {NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL}};

const char *const cli_environment[] = {
    "LOOM_PLUGINS", "plug-in files to load, colon-separated",
    "LOOM_PLUGIN_PATH", "folders whose libloom-*.so plug-ins load, colon-separated",
    "LOOM_LOG", "debug, info, warning, error or quiet: which messages loom prints "
    "(default warning)",
    "LOOM_SHM_DIR", "where loom record keeps its shared records (default /dev/shm)",
    "TMPDIR", "temporary files, and kept records where shared memory is missing",
    NULL};

const cli_cmd *cli_command(const char *name) {
  for (const cli_cmd *c = cli_commands; c->name; c++)
    if (!strcmp(c->name, name)) return c;
  return NULL;
}

const cli_opt *cli_option(const cli_cmd *c, const char *name) {
  for (const cli_opt *o = c->opts; o && (o->name || o->help); o++)
    if (o->name && !strcmp(o->name, name)) return o;
  return NULL;
}

int cli_nvalues(const cli_opt *o) {
  int n = 0;
  for (const char *p = o->arg; p && *p; p++)
    if (*p != ' ' && (p == o->arg || p[-1] == ' ')) n++;
  return n;
}
