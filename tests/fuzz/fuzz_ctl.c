/*
 * fuzz_ctl.c - the trigger/control request parser (src/ctl/ctl_req.c),
 * without a socket.  A trigger request that parses asks for a window of
 * steps or of a positive duration, never a negative delay, with a start
 * step of -1 or one at or after the process's next step (unless asked
 * ahead of it); its description fits and is terminated; a failure says why.
 */
#include <stdlib.h>
#include <string.h>

#include <loom/loom.h>

#include "ctl_req.h"
#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char *s = loom_fuzz_str(data, size);
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
