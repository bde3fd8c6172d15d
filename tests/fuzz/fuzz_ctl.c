/*
 * fuzz_ctl.c - the line protocols loom's own processes exchange, without a
 * socket or a file: the trigger/control request parser (src/ctl/ctl_req.c)
 * and the done/exec lines a recorded process leaves for loom record
 * (tools/loom/done.c).  A trigger request that parses asks for a window of
 * steps or of a positive duration, never a negative delay, with a start
 * step of -1 or one at or after the process's next step (unless asked
 * ahead of it); its description fits and is terminated; a failure says why.
 * A done line that parses as a trace or a window reads back the same after
 * done_format; every line with a tab has its text.
 */
#include <stdlib.h>
#include <string.h>

#include <loom/loom.h>

#include "ctl_req.h"
#include "done.h"
#include "fuzz.h"

static void check_done(const char *s) {
  done_line d, again;
  done_kind k = done_parse(s, &d);
  FUZZ_CHECK(k == d.kind && k >= DONE_BAD && k <= DONE_NONE, "done kind %d", (int)k);
  FUZZ_CHECK(k == DONE_BAD || d.text, "done line without its text");
  if (k != DONE_TRACE && k != DONE_WINDOW) return;
  int n = done_format(NULL, 0, &d);
  char *buf = malloc((size_t)n + 1);
  if (!buf) return;
  done_format(buf, (size_t)n + 1, &d);
  FUZZ_CHECK(done_parse(buf, &again) == k && again.seq == d.seq && again.events == d.events &&
                 again.flows == d.flows && again.devices == d.devices &&
                 again.dropped == d.dropped && again.warnings == d.warnings &&
                 !strcmp(again.text, d.text),
             "done line '%s' reads back otherwise", buf);
  free(buf);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char *s = loom_fuzz_str(data, size);
  check_done(s);
  const int64_t next[] = {0, 5, 1 << 20};
  for (size_t i = 0; i < 2 * (sizeof next / sizeof next[0]); i++) {
    int ring = i >= sizeof next / sizeof next[0]; /* then as a process in ring mode */
    loom__ctl_req q;
    char err[256] = "";
    if (loom__ctl_parse(s, next[i % (sizeof next / sizeof next[0])], ring, &q, err, sizeof err) != 0) {
      FUZZ_CHECK(err[0], "a bad request without a message");
      continue;
    }
    FUZZ_CHECK(memchr(q.op, 0, sizeof q.op), "op not terminated");
    if (strcmp(q.op, "trigger")) continue;
    const loom__window_req *w = &q.win;
    FUZZ_CHECK(ring || w->steps > 0 || w->duration_ns > 0, "a window of %lld steps and %lld ns",
               (long long)w->steps, (long long)w->duration_ns);
    FUZZ_CHECK(w->delay_ns >= 0 && w->duration_ns >= 0 && w->steps >= 0,
               "negative: delay %lld, duration %lld, steps %lld", (long long)w->delay_ns,
               (long long)w->duration_ns, (long long)w->steps);
    FUZZ_CHECK(w->start_step >= -1 && q.start_step >= -1, "start step %lld", (long long)w->start_step);
    FUZZ_CHECK(q.asked == 0 || q.asked == 1, "asked %d", q.asked);
    FUZZ_CHECK(!w->out || (w->out == q.out && *w->out), "out");
    char desc[256];
    loom__ctl_describe(w, desc, sizeof desc);
    FUZZ_CHECK(desc[0] && memchr(desc, 0, sizeof desc), "description");
  }
  free(s);
  return 0;
}
