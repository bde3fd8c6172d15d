/*
 * help.c - `loom CMD --help` and the usage of a wrong command line, both
 * rendered from the command's description (spec.c): the same sections and
 * words as its man page (man.c), wrapped to 79 columns.
 */
#include <string.h>

#include "spec.h"

#define WIDTH 79
#define COL 22 /* where an option's text begins */

/* Words of text from column `at` (the cursor is there), wrapped at WIDTH
 * with continuation lines indented by `indent`; ends the line. */
static void wrap(FILE *f, const char *text, int at, int indent) {
  int col = at, first = 1;
  for (const char *p = text; *p;) {
    while (*p == ' ') p++;
    size_t n = strcspn(p, " ");
    if (!n) break;
    if (!first && col + 1 + (int)n > WIDTH) {
      fprintf(f, "\n%*s", indent, "");
      col = indent;
    } else if (!first) {
      fputc(' ', f);
      col++;
    }
    fprintf(f, "%.*s", (int)n, p);
    col += (int)n;
    first = 0;
    p += n;
  }
  fputc('\n', f);
}

/* Paragraphs separated by '\n', each wrapped, indented, a blank line between. */
static void paragraphs(FILE *f, const char *text, int indent) {
  char buf[2048];
  for (const char *p = text; *p;) {
    size_t n = strcspn(p, "\n");
    snprintf(buf, sizeof buf, "%.*s", (int)n, p);
    fprintf(f, "%*s", indent, "");
    wrap(f, buf, indent, indent);
    p += n;
    if (*p) {
      p++;
      fputc('\n', f);
    }
  }
}

/* One option or argument: its name (and value) then its text, default said. */
static void item(FILE *f, const char *name, const char *arg, const char *help,
                 const char *dflt) {
  char head[128], text[2048];
  snprintf(head, sizeof head, "%s%s%s", name, arg ? " " : "", arg ? arg : "");
  snprintf(text, sizeof text, "%s%s%s%s", help, dflt ? " (default: " : "", dflt ? dflt : "",
           dflt ? ")" : "");
  int w = fprintf(f, "  %s", head);
  if (w + 2 > COL) fprintf(f, "\n%*s", COL, "");
  else fprintf(f, "%*s", COL - w, "");
  wrap(f, text, COL, COL);
}

static void synopsis(FILE *f, const cli_cmd *c) {
  int forms = 0;
  for (const char *const *s = c->synopsis; *s; s++) {
    if (**s == ' ') {
      fprintf(f, "%*s%s\n", 12, "", *s + strspn(*s, " "));
      continue;
    }
    fprintf(f, "%sloom %s\n", forms++ ? "       " : "usage: ", *s);
  }
}

static void options(FILE *f, const cli_cmd *c) {
  if (c->args) {
    fprintf(f, "\narguments:\n");
    for (const cli_opt *o = c->args; o->name; o++) item(f, o->name, NULL, o->help, o->dflt);
  }
  fprintf(f, "\noptions:\n");
  for (const cli_opt *o = c->opts; o && (o->name || o->help); o++) {
    if (o->name) item(f, o->name, o->arg, o->help, o->dflt);
    else fprintf(f, "%s\n", o->help);
  }
  item(f, "-h, --help", NULL, "print this help and exit", NULL);
}

/* loom's own help: its commands and the environment it reads. */
static void commands(FILE *f) {
  fprintf(f, "\ncommands:\n");
  for (const cli_cmd *c = cli_commands + 1; c->name; c++) item(f, c->name, NULL, c->summary, NULL);
  fprintf(f, "\nenvironment:\n");
  for (const char *const *e = cli_environment; *e; e += 2) item(f, e[0], NULL, e[1], NULL);
}

void cli_help(FILE *f, const cli_cmd *c) {
  synopsis(f, c);
  fputc('\n', f);
  paragraphs(f, c->description, 0);
  if (c == cli_commands) commands(f);
  options(f, c);
  fprintf(f, "\nexit status:\n");
  paragraphs(f, c->exit_status, 2);
  if (c->examples) {
    fprintf(f, "\nexamples:\n");
    for (const char *const *e = c->examples; *e; e += 2) {
      fprintf(f, "  %s\n%*s", e[0], 6, "");
      wrap(f, e[1], 6, 6);
    }
  }
  fprintf(f, "\nsee also:\n");
  paragraphs(f, c->see_also, 2);
}

void cli_usage(FILE *f, const cli_cmd *c) {
  synopsis(f, c);
  fprintf(f, "run 'loom %s%s--help' for every option and its default\n",
          c == cli_commands ? "" : c->name, c == cli_commands ? "" : " ");
}

int cli_wants_help(const cli_cmd *c, int argc, char **argv) {
  int program = !strcmp(c->name, "record");
  for (int i = 2; i < argc; i++) {
    const char *a = argv[i];
    if (!strcmp(a, "--")) return 0;
    if (!strcmp(a, "-h") || !strcmp(a, "--help")) return 1;
    const cli_opt *o = cli_option(c, a);
    if (o) i += cli_nvalues(o);
    else if (program && a[0] != '-') return 0; /* record's program and its arguments */
  }
  return 0;
}
