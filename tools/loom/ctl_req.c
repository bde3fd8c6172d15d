/*
 * ctl_req.c - a trigger request's lines read into a window request
 * (ctl_req.h), and its description for the answers.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctl_req.h"
#include "kineto_cfg.h"

const char *loom__ctl_field(const char *req, const char *key, char *out, size_t n) {
  size_t kl = strlen(key);
  for (const char *p = req; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL) {
    if (strncmp(p, key, kl) || p[kl] != '=') continue;
    size_t vl = strcspn(p + kl + 1, "\n");
    if (vl >= n) vl = n - 1;
    memcpy(out, p + kl + 1, vl);
    out[vl] = 0;
    return out;
  }
  return NULL;
}

static int64_t field_int(const char *req, const char *key, int64_t dflt) {
  char v[64];
  return loom__ctl_field(req, key, v, sizeof v) ? strtoll(v, NULL, 10) : dflt;
}

int loom__ctl_parse(const char *req, int64_t next_step, loom__ctl_req *r, char *err,
                    size_t nerr) {
  memset(r, 0, sizeof *r);
  if (!loom__ctl_field(req, "op", r->op, sizeof r->op)) r->op[0] = 0;
  if (strcmp(r->op, "trigger")) return 0;
  loom__ondemand k;
  loom__ondemand_init(&k);
  k.start_step = field_int(req, "start_step", -1);
  k.roundup = field_int(req, "roundup", 0);
  k.warmup = field_int(req, "warmup", 0);
  r->win = (loom__window_req){.delay_ns = field_int(req, "delay_ns", 0),
                              .duration_ns = field_int(req, "duration_ns", 0),
                              .steps = field_int(req, "steps", 0),
                              .start_step = -1,
                              .out = loom__ctl_field(req, "out", r->out, sizeof r->out)};
  if (r->win.out && !*r->win.out) r->win.out = NULL;
  if (k.start_step >= 0) r->win.start_step = loom__ondemand_start(&k, next_step);
  if (r->win.steps <= 0 && r->win.duration_ns <= 0) {
    snprintf(err, nerr, "a window needs a duration or a number of steps");
    return -1;
  }
  r->wait = field_int(req, "wait", 1) != 0;
  return 0;
}

void loom__ctl_describe(const loom__window_req *r, char *out, size_t n) {
  const char *s = r->steps == 1 ? "" : "s";
  if (r->steps > 0 && r->start_step >= 0)
    snprintf(out, n, "%lld step%s from step %lld", (long long)r->steps, s,
             (long long)r->start_step);
  else if (r->steps > 0)
    snprintf(out, n, "%lld step%s from the next one", (long long)r->steps, s);
  else snprintf(out, n, "%.3f s", (double)r->duration_ns / 1e9);
  if (r->delay_ns > 0) {
    size_t l = strlen(out);
    snprintf(out + l, n - l, " after %.3f s", (double)r->delay_ns / 1e9);
  }
}
