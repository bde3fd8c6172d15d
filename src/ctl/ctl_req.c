/*
 * ctl_req.c - a trigger request's lines read into a window request
 * (ctl_req.h), and its description for the answers.
 */
#include <errno.h>
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

/* KEY's value as a whole number in [lo, hi], dflt when the line is
 * missing; -1 with "KEY=VALUE: why" in err when it is not one. */
static int field_int(const char *req, const char *key, int64_t lo, int64_t hi, int64_t dflt,
                     int64_t *out, char *err, size_t nerr) {
  char v[64];
  *out = dflt;
  if (!loom__ctl_field(req, key, v, sizeof v)) return 0;
  char *end;
  errno = 0;
  long long n = strtoll(v, &end, 10);
  if (!*v || *end || errno || n < lo || n > hi) {
    snprintf(err, nerr, "%s=%s: expected a whole number from %lld to %lld", key, v,
             (long long)lo, (long long)hi);
    return -1;
  }
  *out = n;
  return 0;
}

int loom__ctl_parse(const char *req, int64_t next_step, int ring, loom__ctl_req *r, char *err,
                    size_t nerr) {
  memset(r, 0, sizeof *r);
  if (!loom__ctl_field(req, "op", r->op, sizeof r->op)) r->op[0] = 0;
  if (strcmp(r->op, "trigger")) return 0;
  loom__ondemand k;
  loom__ondemand_init(&k);
  loom__window_req *w = &r->win;
  int64_t wait, asked, kinds;
  /* Steps as Kineto counts them (int32); times up to about 292 years. */
  const int64_t steps_max = INT32_MAX, ns_max = INT64_MAX / 2;
  if (field_int(req, "start_step", -1, steps_max, -1, &k.start_step, err, nerr) ||
      field_int(req, "roundup", 0, steps_max, 0, &k.roundup, err, nerr) ||
      field_int(req, "warmup", 0, steps_max, 0, &k.warmup, err, nerr) ||
      field_int(req, "delay_ns", 0, ns_max, 0, &w->delay_ns, err, nerr) ||
      field_int(req, "duration_ns", 0, ns_max, 0, &w->duration_ns, err, nerr) ||
      field_int(req, "steps", 0, steps_max, 0, &w->steps, err, nerr) ||
      field_int(req, "wait", 0, 1, 1, &wait, err, nerr) ||
      field_int(req, "asked", 0, 1, 1, &asked, err, nerr) ||
      field_int(req, "kinds", 0, UINT32_MAX, 0, &kinds, err, nerr))
    return -1;
  w->kinds = (uint32_t)kinds;
  r->asked = (int)asked;
  r->start_step = k.start_step;
  r->wait = (int)wait;
  w->start_step = -1;
  w->out = loom__ctl_field(req, "out", r->out, sizeof r->out);
  if (w->out && !*w->out) w->out = NULL;
  if (ring) return 0; /* a dump of the ring: ctl.c's answer_ring */
  if (k.start_step >= 0) w->start_step = loom__ondemand_start(&k, next_step);
  if (w->steps <= 0 && w->duration_ns <= 0) {
    snprintf(err, nerr, "a window needs a duration or a number of steps (loom trigger PID "
                        "--duration SEC or --steps K)");
    return -1;
  }
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
