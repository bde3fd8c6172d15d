/*
 * ctl_req.h - the control socket's request as text (the protocol in
 * ctl.h) read into a window request, apart from the socket, so that it can
 * be tested and fuzzed on its own (tests/fuzz/fuzz_ctl.c).
 */
#ifndef LOOM_CTL_REQ_H
#define LOOM_CTL_REQ_H
#include <stddef.h>
#include <stdint.h>

#include "window/trigger.h"

typedef struct loom__ctl_req {
  char op[32];          /* "info", "trigger", or what the client sent */
  loom__window_req win; /* op=trigger: the window (win.out points at out) */
  int wait;             /* keep the connection for the window's end */
  int asked;            /* a duration was asked (not Kineto's default): a ring dump keeps it */
  int64_t start_step;   /* the start step as sent (-1: none), before it is resolved */
  char out[4096];
} loom__ctl_req;

/* The value of KEY in the request's lines, into out (cut at n - 1 bytes),
 * or NULL when the request has no such line. */
const char *loom__ctl_field(const char *req, const char *key, char *out, size_t n);

/* Reads req (the lines after the magic line, up to the empty line) into *r;
 * next_step is the step the process begins next (a start step already past
 * is resolved against it, as Kineto does).  For a process in ring mode
 * (ring != 0) a trigger is a dump of the ring: the start step is left as
 * sent and no window is required.  0, or -1 with "what is wrong" in err. */
int loom__ctl_parse(const char *req, int64_t next_step, int ring, loom__ctl_req *r, char *err,
                    size_t nerr);

/* "3 steps from step 10", "0.500 s after 1.000 s", for the answers. */
void loom__ctl_describe(const loom__window_req *r, char *out, size_t n);
#endif
