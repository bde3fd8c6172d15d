/*
 * samples.h - CPU samples of a trace as interned frames and call sites.
 *
 * A sample is an event of kind LOOM_KIND_SAMPLE whose string argument
 * "stack" holds its call stack as text (loom.h: one line per frame, leaf
 * first, "function\tmodule\t0xOFFSET").  Writers and the report need the
 * stacks as a tree instead: each distinct frame once, each call site (a
 * frame under a parent site) once, each sample pointing at its leaf site.
 * loom__samples_build derives that from a trace; readers of formats that
 * store the tree (Chrome JSON stackFrames, Perfetto callstacks) go the other
 * way with loom__samples_site and loom__samples_text.
 */
#ifndef LOOM_SAMPLES_H
#define LOOM_SAMPLES_H

#include <stddef.h>
#include <stdint.h>

#include "trace/trace.h"
#include "util/util.h"

typedef struct loom__sframe {
  uint32_t name;   /* function (strs id), 0 when it could not be named */
  uint32_t module; /* module path (strs id), 0 unknown */
  uint64_t offset; /* address relative to the module's load base */
} loom__sframe;

typedef struct loom__ssite {
  uint32_t frame;  /* index into frames */
  uint32_t parent; /* site index + 1; 0 for a root (outermost) frame */
  uint32_t depth;  /* 1 for a root */
} loom__ssite;

typedef struct loom__sample {
  size_t ev;       /* event index in the trace */
  uint32_t site;   /* leaf site index + 1; 0 for an empty stack */
} loom__sample;

typedef struct loom__samples {
  loom__strtab strs;
  loom__sframe *frames;
  size_t nframes, cap_frames;
  loom__ssite *sites;
  size_t nsites, cap_sites;
  loom__sample *samples;
  size_t nsamples, cap_samples;
  loom__map frame_of; /* frame text id -> frame index + 1 */
  loom__map site_of;  /* parent << 32 | frame -> site index + 1 */
  uint32_t k_stack;   /* trace string id of "stack", 0 if absent */
} loom__samples;

void loom__samples_init(loom__samples *s);
void loom__samples_free(loom__samples *s);
/* Every sample of t, in event order.  0, or -1 when out of memory. */
int loom__samples_build(const loom_trace *t, loom__samples *s);
/* The frame (name, module, offset), added if new: its index, or -1. */
long loom__samples_frame(loom__samples *s, const char *name, const char *module, uint64_t offset);
/* The site of frame under parent (site index + 1, 0 root), added if new:
 * site index + 1, or 0 when out of memory. */
uint32_t loom__samples_site(loom__samples *s, uint32_t parent, uint32_t frame);
/* The stack text of site (index + 1), leaf first, into *buf (grown);
 * its length, or -1 when out of memory. */
long loom__samples_text(const loom__samples *s, uint32_t site, char **buf, size_t *cap);
/* A frame's display name: its function, else "module-basename+0xOFFSET". */
const char *loom__samples_frame_label(const loom__samples *s, uint32_t frame, char *buf, size_t n);
/* The leaf site (index + 1, 0 for an empty stack) of one stack text in
 * loom.h's layout, its frames and sites added if new; -1 when out of memory. */
long loom__samples_parse(loom__samples *s, const char *text, size_t n);
/* The stack argument of event e (its text and length), or NULL. */
const char *loom__sample_stack(const loom_trace *t, const loom__ev *e, size_t *len);

#endif
