/*
 * loom - the command-line tool: its table of commands.  Each command's
 * options, help and man page come from spec.c; `loom CMD --help` (or -h,
 * anywhere before "--" and before record's program) and `loom help CMD`
 * print its help here, before the command parses anything.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "loom/loom.h"
#include "spec.h"

const loom_tools *cli_tools(void) {
  static const loom_tools *t;
  if (!t && !(t = LOOM_TOOLS_GET())) {
    fprintf(stderr, "loom: %s\n", loom_last_error());
    exit(1);
  }
  return t;
}

int cmd_record(int argc, char **argv);        /* record.c */
int cmd_check_backend(int argc, char **argv); /* check.c */
int cmd_merge(int argc, char **argv);         /* merge.c */
int cmd_diff(int argc, char **argv);          /* diff.c */
int cmd_trigger(int argc, char **argv);       /* trigger.c */
int cmd_salvage(int argc, char **argv);       /* salvage.c */
int cmd_backends(int argc, char **argv);      /* backends.c */
int cmd_convert(int argc, char **argv);       /* convert.c */
int cmd_report(int argc, char **argv);        /* report.c */

static int cmd_version(int argc, char **argv) {
  if (argc > 2) {
    cli_usage(stderr, cli_command("version"));
    return 2;
  }
  (void)argv;
  printf("loom %s\n", loom_version_string());
  return 0;
}

/* loom help [COMMAND] */
static int cmd_help(int argc, char **argv) {
  const cli_cmd *c = argc > 2 ? cli_command(argv[2]) : cli_commands;
  if (argc > 3 || !c) {
    if (argc > 2 && !c) fprintf(stderr, "loom help: unknown command '%s'\n", argv[2]);
    cli_usage(stderr, cli_command("help"));
    return 2;
  }
  cli_help(stdout, c);
  return 0;
}

/* The commands; `tools`: it reaches the library's insides, checked before
 * anything is done (cli_tools). */
static const struct command {
  const char *name;
  int (*run)(int argc, char **argv);
  int tools;
} commands[] = {
    {"version", cmd_version, 0},    {"backends", cmd_backends, 0},
    {"convert", cmd_convert, 0},    {"report", cmd_report, 0},
    {"merge", cmd_merge, 0},        {"diff", cmd_diff, 0},
    {"record", cmd_record, 1},      {"check-backend", cmd_check_backend, 1},
    {"trigger", cmd_trigger, 1},    {"salvage", cmd_salvage, 1},
    {"help", cmd_help, 0},
};

int main(int argc, char **argv) {
  if (argc < 2) {
    cli_usage(stderr, cli_commands);
    return 2;
  }
  const char *name = argv[1];
  if (!strcmp(name, "--version")) return cmd_version(argc - 1, argv + 1);
  if (!strcmp(name, "--help") || !strcmp(name, "-h")) return cmd_help(2, argv);
  for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++) {
    if (strcmp(name, commands[i].name)) continue;
    const cli_cmd *c = cli_command(name);
    if (c && cli_wants_help(c, argc, argv)) {
      cli_help(stdout, c);
      return 0;
    }
    if (commands[i].tools) cli_tools();
    return commands[i].run(argc, argv);
  }
  fprintf(stderr, "loom: unknown command '%s'\n", name);
  cli_usage(stderr, cli_commands);
  return 2;
}
