/*
 * salvage_bk.h - the salvager's part for what backends handed to the core,
 * process metadata and thread names (salvage_bk.c), read from a dead
 * process's arena (record/arena.h; written by bkarena.c, meta.c, hostrec.c).
 */
#ifndef LOOM_SALVAGE_BK_H
#define LOOM_SALVAGE_BK_H
#include <stddef.h>
#include <stdint.h>

#include "core/core.h"
#include "record/arena.h"

/* Translates a writer address to the salvager's (NULL: not in the arena). */
typedef void *(*loom__salvage_bk_tr)(const void *ctx, uint64_t p, uint64_t need);

typedef struct loom__salvage_bk {
  loom__abk **bks;
  size_t nbks, cap_bks;
  loom__aclk **clks;
  size_t nclks, cap_clks;
  loom__adev **devs;
  size_t ndevs, cap_devs;
  loom__ares **res;
  size_t nres, cap_res;
  loom__akv **kvs;
  size_t nkvs, cap_kvs;
  /* built */
  loom_backend **fake;   /* one per backend, in s->bk */
  size_t nfake, cap_fake;
  loom__map ids;         /* the dead process's string id -> this one's + 1 */
  const char **strs;     /* its interned strings by id */
  size_t nstrs;
  uint64_t unresolved;   /* ids with no string in the arena */
  uint64_t torn;         /* records or objects that did not add up */
} loom__salvage_bk;

/* Keeps an object of one of the kinds above (room: its body's bytes). */
void loom__salvage_bk_take(loom__salvage_bk *k, uint32_t kind, void *body, uint64_t room);
/* Makes s's backends, devices, resources and metadata from what was kept;
 * strs: the dead process's interned strings.  0, or -1 out of memory. */
int loom__salvage_bk_build(loom__salvage_bk *k, loom_session *s, loom__salvage_bk_tr tr,
                           const void *ctx, const char **strs, size_t nstrs);
/* The name loom_thread_name gave tid (NULL: none). */
const char *loom__salvage_bk_thread_name(void *k, int64_t tid);
/* Per backend, what was kept and what lost, as one warning each in t (and
 * a phrase for the summary in sum); *lost: records counted lost at death.
 * quiet (NULL: none): a backend that handed nothing and declared no device
 * (the program never used its runtime) is not named unless its device type
 * is in this list ("cpu,perf"). */
int loom__salvage_bk_report(loom__salvage_bk *k, loom_trace *t, const char *quiet, char *sum,
                            size_t n, uint64_t *lost, uint64_t *kept);
void loom__salvage_bk_free(loom__salvage_bk *k, loom_session *s);
#endif
