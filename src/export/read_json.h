/*
 * read_json.h - the JSON reader's state, shared by read_json.c (input,
 * finishing the model), read_json_events.c (strings, bad values, events)
 * and read_json_cb.c (yajl's callbacks, numbers and times).
 */
#ifndef LOOM_READ_JSON_H
#define LOOM_READ_JSON_H

#include <yajl/yajl_parse.h>

#include "base/base.h"
#include "export/export.h"
#include "export/memory.h"
#include "trace/trace.h"
#include "util/util.h"

typedef struct pending_flow {
  uint64_t id;
  int64_t ts;
  uint32_t track;
  char ph;
  int bind_enclosing;
} pending_flow;

typedef struct open_b {
  uint32_t track;
  size_t ev; /* event index of the open B */
} open_b;

typedef struct async_open {
  uint64_t id;
  uint32_t cat;
  size_t ev;   /* SIZE_MAX once closed (removed at the next compaction) */
  size_t prev; /* 1 + index of the previous open range with the same key, 0: none */
} async_open;

/* The event object being parsed. */
typedef struct cur_ev {
  char ph;
  uint32_t name, cat;
  int64_t pid, tid;
  int has_pid, has_tid;
  int64_t ts, dur;
  int has_ts, has_dur;
  uint64_t id;
  int bp_e, global;
  uint64_t correlation, external_id;
  unsigned roles;       /* from "loom_role": LOOM_RECORD_F_* */
  int kind;             /* 1 + the kind "loom_kind" names, 0: none (derived) */
  size_t nargs;         /* in the reader's ev_args */
} cur_ev;

enum { AT_TOP, AT_EVENTS, AT_EVENT, AT_ARGS, AT_DEVPROPS, AT_DEVICE, AT_WARNINGS, AT_SKIP };

typedef struct reader {
  loom_trace *t;
  loom__kind_cache kinds; /* category id -> class (loom__cat_class) */
  const char *path;
  int depth;
  int where;          /* AT_* of the current container */
  int skip_depth;     /* depth at which skipping began */
  int skip_ret;       /* where to return after the skipped value */
  int top_is_array;
  int saw_events;     /* a "traceEvents" list (or a top-level list of events) */
  int not_event;      /* the top-level list holds a list: no event list */
  char *key;          /* last map key (loom__rj_set_key: key_in, or key_heap when longer) */
  char *top_key;      /* key of the current top-level value (likewise) */
  char key_in[256], top_in[256];
  char *key_heap, *top_heap;
  size_t key_cap, top_cap;
  cur_ev ev;
  loom__targ *ev_args;    /* the current event's arguments (any number) */
  size_t cap_ev_args;
  /* JSON text of a nested argument value being captured */
  char *cap;
  size_t ncap, capcap;
  int cap_depth, cap_first;
  int cap_top;        /* the value captured is a top-level key's */
  int val_json;       /* the value given to on_value is JSON text */
  loom__dev dev;
  int64_t base;
  int64_t window_end_ts;
  open_b *bs;
  size_t nbs, cap_bs;
  async_open *as;
  size_t nas, cap_as, nas_dead;
  loom__map as_key;    /* async_key(id, cat) -> 1 + index of the latest open range */
  pending_flow *flows;
  size_t nflows, cap_flows;
  loom__map pid_dev;   /* pids that are devices -> 1 + device index */
  loom__map str_ids;   /* string pid/tid -> synthetic id */
  loom__map str_tids;  /* synthetic tid -> its string (id): the thread's name */
  uint64_t next_str_id;
  const loom__sink *sink; /* streaming: events go here in batches */
  int lean; /* streaming without all_args: events' string and nested arguments not kept */
  const loom__flow_sink *fsink; /* streaming: flow ends (may be NULL) */
  int kcode;              /* K_* of the current key inside an event */
  uint32_t key_id;        /* interned current key inside args */
  struct { uint32_t id; uint32_t len; } kcache[256]; /* arg keys, names */
  uint32_t ext_key, corr_key;
  uint32_t role_key, dir_key; /* "loom_role", "direction": read even when streaming */
  uint32_t stack_key;         /* "stack": a CPU sample's stack, read even when streaming */
  loom__memread mem;          /* [memory] instants; their string args read even when streaming */
  int role_unknown;           /* a loom_role word loom does not know was read */
  uint32_t kind_key;          /* "loom_kind": the event's kind, read even when streaming */
  int kind_unknown;           /* a loom_kind value loom does not know was read */
  size_t flush_at;        /* streaming: flush when this many events are held */
  uint64_t nstrings;      /* strings and keys parsed so far */
  int oom;
  char err[256];
} reader;

static inline int loom__rj_capturing(const reader *r) { return r->cap_depth > 0; }

static inline void loom__rj_add_arg(reader *r, loom__targ a) {
  if (r->ev.nargs == UINT16_MAX) /* what an event can hold: the rest counted, not kept */
    loom__trace_arg_past_limit(r->t, a.key, 0);
  else if (LOOM__PUSH(r->ev_args, r->ev.nargs, r->cap_ev_args, a)) {
    r->oom = 1;
  }
}

uint32_t loom__rj_str_n(reader *r, const unsigned char *s, size_t n);
uint64_t loom__rj_str_pid(reader *r, const unsigned char *s, size_t n, int tid);
void loom__rj_bad(reader *r, int kind, const char *what, const char *text, size_t n);
void loom__rj_cap_raw(reader *r, const char *s, size_t n);
void loom__rj_cap_sep(reader *r);
void loom__rj_cap_str(reader *r, const unsigned char *s, size_t n);
void loom__rj_mark_device(reader *r, int64_t pid);
void loom__rj_end_event(reader *r);
/* Sets r->key (top: r->top_key) to s[0..n), whole whatever its length; -1
 * without memory (then the key is empty). */
int loom__rj_set_key(reader *r, int top, const char *s, size_t n);
int loom__rj_flush(reader *r, int all);
loom_status loom__rj_not_a_trace(const reader *r, const char *path);

extern const yajl_callbacks loom__rj_callbacks;

#endif
