/*
 * man.c - the man page of a command (man(7) macros), rendered from its
 * description (spec.c) with the same sections and words as its --help
 * (help.c): NAME, SYNOPSIS, DESCRIPTION, COMMANDS and ENVIRONMENT (loom.1),
 * ARGUMENTS, OPTIONS, EXIT STATUS, EXAMPLES, SEE ALSO.  No hyphenation and
 * no justification, so `man` shows every word as --help does.
 */
#include <string.h>

#include "spec.h"

/* Text for roff: '\', '-', quotes escaped, a leading '.' or '\'' defused. */
static void esc(FILE *f, const char *s, size_t n) {
  for (size_t i = 0; i < n && s[i]; i++) {
    char c = s[i];
    if (i == 0 && (c == '.' || c == '\'')) fputs("\\&", f);
    if (c == '\\') fputs("\\e", f);
    else if (c == '-') fputs("\\-", f);
    else if (c == '\'') fputs("\\(aq", f);
    else if (c == '`') fputs("\\(ga", f);
    else fputc(c, f);
  }
}

static void text(FILE *f, const char *s) {
  esc(f, s, strlen(s));
  fputc('\n', f);
}

/* Paragraphs separated by '\n'. */
static void paragraphs(FILE *f, const char *s) {
  for (const char *p = s; *p;) {
    size_t n = strcspn(p, "\n");
    fputs(".PP\n", f);
    esc(f, p, n);
    fputc('\n', f);
    p += n + (p[n] != 0);
  }
}

static void item(FILE *f, const char *name, const char *arg, const char *help,
                 const char *dflt) {
  fputs(".TP\n\\fB", f);
  esc(f, name, strlen(name));
  fputs("\\fR", f);
  if (arg) {
    fputs(" \\fI", f);
    esc(f, arg, strlen(arg));
    fputs("\\fR", f);
  }
  fputc('\n', f);
  esc(f, help, strlen(help));
  if (dflt) {
    fputs(" (default: ", f);
    esc(f, dflt, strlen(dflt));
    fputc(')', f);
  }
  fputc('\n', f);
}

static void synopsis(FILE *f, const cli_cmd *c) {
  fputs(".SH SYNOPSIS\n", f);
  for (const char *const *s = c->synopsis; *s; s++) {
    if (**s == ' ') {
      text(f, *s + strspn(*s, " "));
      continue;
    }
    if (s != c->synopsis) fputs(".br\n", f);
    fputs("\\fBloom\\fR ", f);
    text(f, *s);
  }
}

static void options(FILE *f, const cli_cmd *c) {
  if (c->args) {
    fputs(".SH ARGUMENTS\n", f);
    for (const cli_opt *o = c->args; o->name; o++) item(f, o->name, NULL, o->help, o->dflt);
  }
  fputs(".SH OPTIONS\n", f);
  for (const cli_opt *o = c->opts; o && (o->name || o->help); o++) {
    if (o->name) {
      item(f, o->name, o->arg, o->help, o->dflt);
      continue;
    }
    fputs(".SS \"", f);
    esc(f, o->help, strlen(o->help));
    fputs("\"\n", f);
  }
  item(f, "-h, --help", NULL, "print this help and exit", NULL);
}

static void commands(FILE *f) {
  fputs(".SH COMMANDS\n", f);
  for (const cli_cmd *c = cli_commands + 1; c->name; c++) item(f, c->name, NULL, c->summary, NULL);
  fputs(".SH ENVIRONMENT\n", f);
  for (const char *const *e = cli_environment; *e; e += 2) item(f, e[0], NULL, e[1], NULL);
}

void cli_man(FILE *f, const cli_cmd *c, const char *version) {
  int top = c == cli_commands;
  char page[64];
  snprintf(page, sizeof page, "%s%s", top ? "" : "loom-", c->name);
  fputs(".\\\" Made by loom-docgen from tools/loom/spec.c, as loom --help is: edit that.\n", f);
  fputs(".TH \"", f);
  for (const char *p = page; *p; p++) fputc(*p >= 'a' && *p <= 'z' ? *p - 32 : *p, f);
  fprintf(f, "\" 1 \"\" \"loom %s\" \"loom manual\"\n.nh\n.ad l\n.SH NAME\n", version);
  esc(f, page, strlen(page));
  fputs(" \\- ", f);
  text(f, c->summary);
  synopsis(f, c);
  fputs(".SH DESCRIPTION\n", f);
  paragraphs(f, c->description);
  if (top) commands(f);
  options(f, c);
  fputs(".SH EXIT STATUS\n", f);
  paragraphs(f, c->exit_status);
  if (c->examples) {
    fputs(".SH EXAMPLES\n", f);
    for (const char *const *e = c->examples; *e; e += 2) item(f, e[0], NULL, e[1], NULL);
  }
  fputs(".SH SEE ALSO\n", f);
  paragraphs(f, c->see_also);
}
