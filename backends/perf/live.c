/*
 * live.c - unwinding while recording (perf.live=1, the default): the
 * unwinding samples.c's worker does on each sample as it arrives, and what
 * the flush then finds.  The unwinder is one libdw state: the worker's
 * while recording, the flush's after the worker has stopped.  It follows
 * the program's mappings as they grow (libraries loaded later): the worker
 * adds them when there are more, from a copy of its own, and starts anew
 * (names and all) when a file is mapped where another was.  Names
 * are found here too, so that the flush only writes them.
 */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "perf.h"

struct pf_live {
  pf_unwinder *u;
  pf_map *maps;    /* the copy u reads */
  size_t nmaps;
  int failed;      /* no unwinder could be had: the flush tries (and says why) */
  int ready;       /* get_ready ran */
  char why[256];   /* a lesser problem pf_unwinder_new gave */
};

pf_live *pf_live_new(void) { return calloc(1, sizeof(pf_live)); }

/* The unwinder over ev's mappings as they are now (made at first use). */
static pf_unwinder *unwinder(pf_live *l, pf_events *ev, char *why, size_t why_len) {
  if (l->u && pf_events_nmaps(ev) == l->nmaps) return l->u;
  pf_map *maps;
  size_t n;
  if (pf_events_maps_copy(ev, &maps, &n)) return l->u; /* the old ones, out of memory */
  if (l->u && pf_unwinder_maps(l->u, maps, n)) { /* a file where another was: anew */
    pf_unwinder_free(l->u);
    l->u = NULL;
  }
  if (!l->u) l->u = pf_unwinder_new(maps, n, why, why_len);
  if (!l->u) {
    free(maps);
    return NULL;
  }
  free(l->maps);
  l->maps = maps;
  l->nmaps = n;
  return l->u;
}

/* Before the first samples: the libdw state over the mappings read at
 * start, which the first sample would otherwise wait for while the next
 * ones pile up raw.  (Not the kernel's symbols: ~48 ms, 150 under a
 * sanitizer, that a program sampled only in user code never needs.) */
static void get_ready(pf_live *l, pf_events *ev) {
  if (l->ready || l->failed || !pf_events_nmaps(ev)) return; /* /proc/self/maps not read yet */
  l->ready = 1;
  (void)unwinder(l, ev, l->why, sizeof l->why);
}

size_t pf_live_unwind(pf_events *ev, void *arg, const pf_sample *s, const uint64_t **pcs) {
  pf_live *l = arg;
  if (!s) {
    get_ready(l, ev);
    return 0;
  }
  if (pf_events_own(ev, s->tid)) return 0; /* the backend's own threads are left out */
  pf_unwinder *u = l->failed ? NULL : unwinder(l, ev, l->why, sizeof l->why);
  if (!u) {
    l->failed = 1;
    return SIZE_MAX;
  }
  size_t k = pf_unwind_pcs(u, s, pcs);
  pf_unwinder_name(u, *pcs, k);
  return k;
}

pf_unwinder *pf_live_unwinder(pf_live *l, pf_events *ev, char *why, size_t why_len) {
  if (l->u) snprintf(why, why_len, "%s", l->why);
  return unwinder(l, ev, why, why_len);
}

void pf_live_free(pf_live *l) {
  if (!l) return;
  pf_unwinder_free(l->u);
  free(l->maps);
  free(l);
}
