/*
 * done.c - reading and writing the lines a recorded process leaves for
 * `loom record` (done.h): one parser instead of a scanf per reader.
 */
#include "done.h"

#include <stdio.h>
#include <string.h>

/* A decimal number at *s (digits only), then *s past it; -1 when none. */
static int number(const char **s, unsigned long long *v) {
  const char *p = *s;
  if (*p < '0' || *p > '9') return -1;
  unsigned long long x = 0;
  for (; *p >= '0' && *p <= '9'; p++) x = x * 10 + (unsigned long long)(*p - '0');
  *v = x;
  *s = p;
  return 0;
}

/* The five counts at p, one space between two, the last ending at tab. */
static int counts(const char *p, const char *tab, done_line *d) {
  unsigned long long *v[5] = {&d->events, &d->flows, &d->devices, &d->dropped, &d->warnings};
  for (int i = 0; i < 5; i++) {
    if (i && *p++ != ' ') return -1;
    if (number(&p, v[i]) != 0) return -1;
  }
  return p == tab ? 0 : -1;
}

done_kind done_parse(const char *line, done_line *d) {
  memset(d, 0, sizeof *d);
  size_t len = strcspn(line, "\n");
  const char *tab = memchr(line, '\t', len);
  if (!tab) return d->kind = DONE_BAD;
  d->text = tab + 1;
  if (!strncmp(line, "failed\t", 7)) return d->kind = DONE_FAILED;
  if (!strncmp(line, "none\t", 5)) return d->kind = DONE_NONE;
  done_line c = *d;
  const char *p = line;
  done_kind k = DONE_TRACE;
  if (!strncmp(p, "window ", 7)) {
    unsigned long long seq;
    p += 7;
    if (number(&p, &seq) != 0 || seq > 0xffffffffu || *p++ != ' ') return d->kind = DONE_BAD;
    c.seq = (unsigned)seq;
    k = DONE_WINDOW;
  }
  if (counts(p, tab, &c) != 0) return d->kind = DONE_BAD;
  *d = c;
  return d->kind = k;
}

int done_format(char *buf, size_t n, const done_line *d) {
  char head[32] = "";
  if (d->kind == DONE_WINDOW) snprintf(head, sizeof head, "window %u ", d->seq);
  return snprintf(buf, n, "%s%llu %llu %llu %llu %llu\t%s", head, d->events, d->flows,
                  d->devices, d->dropped, d->warnings, d->text ? d->text : "");
}
