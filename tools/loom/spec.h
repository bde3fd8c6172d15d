/*
 * spec.h - the one description of loom's command line: every command, its
 * synopsis, arguments and options (with their defaults), from which
 * `loom CMD --help`, the man pages (loom.1, loom-CMD.1) and the bash
 * completion are all made (help.c renders them; loom-docgen writes the
 * pages and the completion at build time), so they cannot disagree.  The
 * parsers of the commands accept exactly the options listed here (ctest
 * cli_help_options checks their sources against `--help`).
 */
#ifndef LOOM_CLI_SPEC_H
#define LOOM_CLI_SPEC_H

#include <stdio.h>

/* What an option's value or an argument is: completion offers it. */
typedef enum cli_val {
  CLI_V_NONE = 0,  /* a flag: no value */
  CLI_V_TEXT,      /* a number, size or text: nothing to offer */
  CLI_V_TRACE,     /* a trace to read (.json, .json.gz, .pftrace, .pftrace.gz) */
  CLI_V_TRACE_OUT, /* a trace (or a folder) to write */
  CLI_V_FILE,      /* any file */
  CLI_V_DIR,       /* a folder */
  CLI_V_DEVICES,   /* device types, comma-separated (`loom backends`) */
  CLI_V_PLUGIN,    /* a plug-in, .so */
  CLI_V_WORDS,     /* one of the words of `words` */
  CLI_V_PROGRAM,   /* a program and its arguments */
  CLI_V_PID,       /* a process recording (`loom trigger --list`) */
  CLI_V_COMMAND,   /* one of loom's commands */
  CLI_V_OPTION     /* KEY=VALUE: a backend's option (`loom backends`) */
} cli_val;

/* One option ("-o", "--top"), argument ("TRACE...") or, with name NULL and
 * help set, the heading of a group of options.  A list ends with an entry
 * whose name and help are both NULL. */
typedef struct cli_opt {
  const char *name;  /* "-o", "--top"; an argument's name has no '-' */
  const char *arg;   /* its value(s) ("N", "B N"), NULL for a flag */
  cli_val val;       /* what the value is (the argument itself for an argument) */
  const char *words; /* CLI_V_WORDS: the words, blank-separated */
  const char *help;  /* what it does: sentences, no line breaks */
  const char *dflt;  /* the default as said after "default: "; NULL: an action */
} cli_opt;

typedef struct cli_cmd {
  const char *name;     /* "report"; "loom" for loom itself */
  const char *summary;  /* one line, lower case, no full stop */
  const char *const *synopsis; /* lines after "loom ", NULL-terminated */
  const char *description; /* paragraphs separated by '\n' */
  const cli_opt *args;  /* arguments, may be NULL */
  const cli_opt *opts;  /* options, may be NULL (-h/--help is added) */
  const char *exit_status;
  const char *const *examples; /* "COMMAND LINE", "what it does", ..., NULL */
  const char *see_also; /* "loom-merge(1), docs/report.md" */
} cli_cmd;

/* Every command, loom itself first; ends with name NULL. */
extern const cli_cmd cli_commands[];
/* The environment loom reads, for loom.1: NAME, what it does; ends NULL. */
extern const char *const cli_environment[];

/* The command named (NULL: unknown; "loom" is loom itself). */
const cli_cmd *cli_command(const char *name);
/* The option `name` of c (NULL: not one of its options). */
const cli_opt *cli_option(const cli_cmd *c, const char *name);
/* How many values an option takes (words of its arg). */
int cli_nvalues(const cli_opt *o);

/* `loom CMD --help`: the whole help of c, wrapped to 79 columns. */
void cli_help(FILE *f, const cli_cmd *c);
/* The synopsis of c and a pointer to --help (a usage error). */
void cli_usage(FILE *f, const cli_cmd *c);
/* 1 when argv[2..] asks c for its help: -h or --help before "--" (and
 * before record's program), values of options skipped. */
int cli_wants_help(const cli_cmd *c, int argc, char **argv);
/* The man page of c (roff, man(7) macros); version: the footer's. */
void cli_man(FILE *f, const cli_cmd *c, const char *version);
/* The bash completion script of every command (complete -F _loom loom). */
void cli_completion(FILE *f);

#endif
