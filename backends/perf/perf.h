/*
 * perf.h - shared declarations of libloom-perf.so, loom's CPU sampling
 * backend on Linux perf_event_open (docs/sampling.md).
 *
 * events.c opens the events per thread and drains their ring buffers into
 * memory while the program runs (a reader thread, no work beyond copying);
 * unwind.c turns the stored samples into named call stacks after recording
 * (libdw); backend.c is the loom side (options, records, counters).
 */
#ifndef LOOM_PERF_H
#define LOOM_PERF_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <loom/plugin.h>

/* Counters kept per thread from software events sampled at period 1. */
enum { PF_CTR_CSWITCH, PF_CTR_FAULTS, PF_CTR_MIGRATIONS, PF_NCTR };

/* One stored sample: raw, as the kernel gave it, until it is unwound (by
 * the worker while recording, live.c; else at flush); then only its frames
 * are kept. */
typedef struct pf_sample {
  uint64_t time;      /* CLOCK_MONOTONIC ns */
  uint32_t tid;
  uint32_t nchain;    /* kernel+user call chain entries (PERF_CONTEXT_* marks included) */
  uint32_t nregs;     /* user registers (0: the sample was in the kernel with no user state) */
  uint32_t stack_len; /* bytes of user stack copied from regs' sp upward */
  uint8_t *raw;       /* chain, regs, then stack (NULL once unwound) */
  uint64_t *pcs;      /* unwound: its frames, innermost first */
  uint32_t npcs;
  int unwound;
} pf_sample;

typedef struct pf_events pf_events;

/* Grows array *p of *cap elements of elem bytes to hold need (doubling):
 * 0, or -1 out of memory (*p unchanged). */
int pf_grow(void **p, size_t *cap, size_t need, size_t elem);

/* The worker's unwinding of raw sample s (live.c): its frames into *pcs,
 * valid until the next call; returns how many (SIZE_MAX: s left raw).
 * Called with s NULL while the worker has nothing to do: a chance to read
 * what the first samples would wait for. */
typedef size_t (*pf_unwind_fn)(pf_events *ev, void *ud, const pf_sample *s,
                               const uint64_t **pcs);

/* A counter event: one occurrence on a thread. */
typedef struct pf_tick {
  uint64_t time;
  uint32_t tid;
  uint8_t which;      /* PF_CTR_* */
} pf_tick;

/* A mapping of executable code (from /proc/self/maps at start, then the
 * kernel's mmap records), in the order seen. */
typedef struct pf_map {
  uint64_t start, end, pgoff;
  char *path;
} pf_map;

typedef struct pf_config {
  uint64_t period_ns;   /* cpu-clock period */
  uint32_t stack_bytes; /* user stack copied per sample, 0 = frame pointers only */
  int counters;         /* open the OS counter events */
  uint64_t memory_cap;  /* bytes of stored samples */
  int live;             /* unwind while recording (perf.live) */
  pf_unwind_fn unwind;  /* set by pf_start when live: the worker thread's work */
  void *unwind_ud;
} pf_config;

/* Opens the events for every thread of the process (following threads they
 * create) and starts the reader.  On failure returns -1 and writes the
 * reason into why.  *user_only gets 1 when the kernel allowed only user-space
 * sampling (perf_event_paranoid); *paranoid the sysctl's value read. */
int pf_events_start(pf_events **out, const pf_config *cfg, int *user_only, int *paranoid,
                    char *why, size_t why_len);
/* Stops sampling, drains what is left and stops the reader. */
void pf_events_stop(pf_events *ev);
void pf_events_free(pf_events *ev);

/* What was stored (after pf_events_stop, valid until pf_events_free). */
size_t pf_events_nsamples(const pf_events *ev);
const pf_sample *pf_events_sample(const pf_events *ev, size_t i);
/* A thread of the backend's own (the reader, the worker): its samples are
 * left out. */
int pf_events_own(const pf_events *ev, uint32_t tid);
/* The mappings seen so far, copied (free the array, not the paths: those
 * live until pf_events_free); safe while recording.  0, or -1 out of
 * memory. */
int pf_events_maps_copy(pf_events *ev, pf_map **maps, size_t *n);
size_t pf_events_nmaps(pf_events *ev);
const pf_tick *pf_events_ticks(const pf_events *ev, size_t *n);
const pf_map *pf_events_maps(const pf_events *ev, size_t *n);
/* Records the kernel lost (ring full) and samples not kept (memory cap). */
uint64_t pf_events_lost(const pf_events *ev, uint64_t *capped);
/* Records (samples, counter ticks, mappings) not kept for want of memory. */
uint64_t pf_events_oom(const pf_events *ev);
/* Threads the events were opened on at start. */
size_t pf_events_threads(const pf_events *ev);
/* Event descriptors found no longer the backend's at stop (the program
 * closed them), of how many opened. */
size_t pf_events_gone(const pf_events *ev, size_t *opened);

/* ---- fds.c: descriptors kept inside the program, used only while they
 * are still the backend's (the program may close them and reuse the
 * numbers) ---- */
/* fd's device and inode: 0, or -1. */
int pf_fd_inode(int fd, uint64_t *dev, uint64_t *ino);
/* 1 when fd is open on that device and inode. */
int pf_fd_same(int fd, uint64_t dev, uint64_t ino);
/* 1 when fd still is the perf event of that id (dev, ino: perf's inode). */
int pf_fd_is_event(int fd, uint64_t dev, uint64_t ino, uint64_t id);
/* A pipe that wakes a thread polling rd. */
typedef struct pf_wake {
  int rd, wr;
  uint64_t dev, ino;
} pf_wake;
int pf_wake_open(pf_wake *w);               /* 0, or -1 (rd, wr -1) */
int pf_wake_ours(const pf_wake *w, int fd); /* 1 when fd is one of its ends */
void pf_wake_ring(const pf_wake *w);        /* a byte written, if wr is still its own */
void pf_wake_close(pf_wake *w);
/* Descriptors handed to libdw (closed by dwfl_end), one libdw state at a
 * time: noted (and made close-on-exec), forgotten when libdw did not take
 * one, checked before dwfl_end (1: each is still the file it was), then
 * released (closed here, if close_ours, where still the same file). */
void pf_held_add(int fd);
void pf_held_forget(int fd);
int pf_held_intact(void);
void pf_held_release(int close_ours);

/* ---- samples.c: the samples' store and the worker (events.c's) ---- */
typedef struct pf_store pf_store;
/* A store of at most cap bytes; with unwind, its worker thread starts. */
pf_store *pf_store_new(pf_events *ev, uint64_t cap, pf_unwind_fn unwind, void *ud);
/* The reader keeps sample h (its counts and time) with its raw parts:
 * 0, 1 over the cap (not kept), -1 out of memory. */
int pf_store_add(pf_store *st, const pf_sample *h, const uint8_t *chain, const uint8_t *regs,
                 const uint8_t *stack);
void pf_store_stop(pf_store *st); /* the worker ends; what it did not reach stays raw */
void pf_store_free(pf_store *st);
size_t pf_store_n(const pf_store *st);
const pf_sample *pf_store_at(const pf_store *st, size_t i);
pid_t pf_store_worker_tid(const pf_store *st);

/* ---- unwind.c ---- */
typedef struct pf_unwinder pf_unwinder;
/* Builds the address space from maps.  NULL when out of memory or libdw
 * fails (why says which). */
pf_unwinder *pf_unwinder_new(const pf_map *maps, size_t nmaps, char *why, size_t why_len);
void pf_unwinder_free(pf_unwinder *u);
/* Adds the mappings maps has beyond those u knows (its first ones must be
 * u's, copied or not): 0, or -1 when one of them lies over an address u
 * has another file at (then only a new unwinder over all of them will do;
 * u is unchanged). */
int pf_unwinder_maps(pf_unwinder *u, const pf_map *maps, size_t nmaps);
/* The frames of raw sample s, innermost first, into *pcs (the unwinder's,
 * valid until its next call): DWARF unwinding over the copied stack when it
 * has one, else the kernel's frame-pointer chain.  Returns how many. */
size_t pf_unwind_pcs(pf_unwinder *u, const pf_sample *s, const uint64_t **pcs);
/* Writes frames pcs as loom's "stack" text (LOOM_KIND_SAMPLE) into *buf
 * (grown as needed), naming each (once per address).  0, or -1 when out of
 * memory. */
int pf_stack_text(pf_unwinder *u, const uint64_t *pcs, size_t n, char **buf, size_t *cap,
                  size_t *len);
/* Names frames pcs ahead of pf_stack_text (the names are kept). */
void pf_unwinder_name(pf_unwinder *u, const uint64_t *pcs, size_t n);

/* ---- live.c: unwinding while recording ---- */
typedef struct pf_live pf_live;
pf_live *pf_live_new(void);
/* The worker's unwinding (a pf_unwind_fn, ud a pf_live): names the frames
 * too, so that the flush only writes them. */
size_t pf_live_unwind(pf_events *ev, void *live, const pf_sample *s, const uint64_t **pcs);
/* After recording (the worker stopped): the unwinder, over the final maps,
 * with the names found so far (NULL with why set when none can be had; why
 * may also say a lesser problem). */
pf_unwinder *pf_live_unwinder(pf_live *l, pf_events *ev, char *why, size_t why_len);
void pf_live_free(pf_live *l);
/* Statistics: distinct addresses symbolized, and ns spent symbolizing and
 * unwinding. */
void pf_unwinder_stats(const pf_unwinder *u, uint64_t *distinct, uint64_t *sym_ns,
                       uint64_t *unwind_ns, uint64_t *reached_dwarf, uint64_t *used_fp);
/* The kernel's text symbols (kallsyms.c), in address order: names[] holds
 * each one's NUL-terminated name at its offset. */
typedef struct pf_ksym {
  uint64_t addr;
  size_t name; /* offset in names */
} pf_ksym;
typedef struct pf_ksyms {
  pf_ksym *v;
  size_t n, cap;
  char *names;
  size_t len, names_cap;
  int from_cache; /* kcache.c: kept from an earlier read */
} pf_ksyms;
/* From the cache of an earlier read while its key holds, else from
 * /proc/kallsyms, then kept (kcache.c).  None where the kernel hides their
 * addresses (NULL only out of memory). */
pf_ksyms *pf_ksyms_get(void);
/* From /proc/kallsyms. */
pf_ksyms *pf_ksyms_read(void);
/* Room for n symbols with len bytes of names; NULL out of memory. */
pf_ksyms *pf_ksyms_alloc(size_t n, size_t len);
/* 1 when k's symbols are in order with their names in bounds (a cache
 * file's). */
int pf_ksyms_sane(const pf_ksyms *k);
/* Where u's kernel symbols came from: "unread" (no kernel frame named),
 * "none" (hidden), "cache" or "kallsyms". */
const char *pf_unwinder_ksyms(const pf_unwinder *u);
/* The symbol at or below pc, NULL when none. */
const char *pf_ksyms_name(const pf_ksyms *k, uint64_t pc);
void pf_ksyms_free(pf_ksyms *k);

/* How the distinct frames with a module were named: from the module's
 * symbol index, or by libdwfl's own search; *mismatched: index answers
 * that differ from libdwfl's, -1 unless LOOM_PERF_CHECK_NAMES=1 checked. */
void pf_unwinder_names(const pf_unwinder *u, uint64_t *indexed, uint64_t *dwfl,
                       int64_t *mismatched);
/* Samples whose stacks reached the most frames kept (*max_frames): their
 * outermost frames are left out. */
uint64_t pf_unwinder_cut(const pf_unwinder *u, unsigned *max_frames);

/* x86-64 registers copied per sample (PERF_SAMPLE_REGS_USER), in the
 * order of their perf numbers: what DWARF unwinding starts from. */
uint64_t pf_regs_mask(void);

#endif
