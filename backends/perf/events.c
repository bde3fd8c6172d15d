/*
 * events.c - the perf_event_open side of libloom-perf.so: one cpu-clock
 * sampling event per thread alive at start (with inherit, so threads they
 * create later are followed and write into the same ring), three software
 * events per thread sampled at period 1 for the OS counters (context
 * switches, page faults, CPU migrations) redirected into that ring, and a
 * reader thread that copies records out of the rings into memory: the
 * samples into samples.c's store, whose worker unwinds them (perf.live).
 * Nothing is unwound or named in this file, and the reader does nothing
 * else: the program pays for the kernel's sample (and the copy of its user
 * stack), the reader's memcpy and the worker's unwinding (at most a quarter
 * of a CPU).
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/perf_event.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "perf.h"

/* One ring per CPU: every thread's events on that CPU write into it
 * (PERF_EVENT_IOC_SET_OUTPUT).  The kernel refuses to map an inherited
 * per-thread event (cpu -1), so inheritance needs per-CPU events. */
typedef struct pf_ring {
  int cpu;
  int fd;                 /* the event that owns the buffer */
  uint64_t id;            /* its id (fds.c: is fd still it) */
  void *base;
  size_t len, mask;       /* mapping length, data size - 1 */
} pf_ring;

/* What an event id stands for (PERF_SAMPLE_IDENTIFIER; inherited copies
 * report their parent's id). */
typedef struct pf_id {
  uint64_t id;
  int which;              /* -1 the cpu-clock sampler, else PF_CTR_* */
} pf_id;

/* An event's descriptor and the id the kernel gave it. */
typedef struct pf_evfd {
  int fd;
  uint64_t id;
} pf_evfd;

struct pf_events {
  pf_config cfg;
  pf_ring *rings;
  size_t nrings;
  pf_evfd *fds;           /* every event opened */
  size_t nfds, cap_fds, gone;
  uint64_t ev_dev, ev_ino; /* the inode every perf_event file shares */
  pf_wake wake;           /* stop wakes the reader through it */
  pf_id *ids;             /* sorted by id once open */
  size_t nids, cap_ids;
  size_t nthreads;
  pthread_t reader;
  int have_reader;
  atomic_int stop;
  pid_t pid, reader_tid;
  atomic_int reader_ready;
  /* Stored records: written by the reader while recording, read after
   * (the samples' store, samples.c, has its worker too; the maps are read
   * while recording under maps_mu). */
  pf_store *store;
  pf_tick *ticks;
  size_t nticks, cap_ticks;
  pthread_mutex_t maps_mu;
  pf_map *maps;
  size_t nmaps, cap_maps;
  uint64_t lost, capped;
  uint8_t *tmp;           /* a record that wraps the ring end */
  size_t cap_tmp;
  uint64_t oom; /* records not kept for want of memory (samples, ticks, maps) */
};

uint64_t pf_regs_mask(void) {
  /* AX BX CX DX SI DI BP SP IP (0-8) and R8-R15 (16-23), asm/perf_regs.h */
  return 0x1ffull | (0xffull << 16);
}

int pf_grow(void **p, size_t *cap, size_t need, size_t elem) {
  if (need <= *cap) return 0;
  size_t c = *cap ? *cap : 64;
  while (c < need) c *= 2;
  void *q = realloc(*p, c * elem);
  if (!q) return -1;
  *p = q;
  *cap = c;
  return 0;
}

static int read_paranoid(void) {
  FILE *f = fopen("/proc/sys/kernel/perf_event_paranoid", "r");
  int v = 99;
  if (f) {
    if (fscanf(f, "%d", &v) != 1) v = 99;
    fclose(f);
  }
  return v;
}

static void base_attr(struct perf_event_attr *a, int user_only) {
  memset(a, 0, sizeof *a);
  a->size = sizeof *a;
  a->type = PERF_TYPE_SOFTWARE;
  a->disabled = 1;
  a->inherit = 1;
  a->exclude_hv = 1;
  a->exclude_kernel = user_only ? 1 : 0;
  a->exclude_callchain_kernel = user_only ? 1 : 0;
  a->use_clockid = 1;
  a->clockid = CLOCK_MONOTONIC;
  a->sample_id_all = 1;
}

static void sample_attr(struct perf_event_attr *a, const pf_config *c, int user_only) {
  base_attr(a, user_only);
  a->config = PERF_COUNT_SW_CPU_CLOCK;
  a->sample_period = c->period_ns;
  a->sample_type = PERF_SAMPLE_IDENTIFIER | PERF_SAMPLE_IP | PERF_SAMPLE_TID | PERF_SAMPLE_TIME |
                   PERF_SAMPLE_CALLCHAIN;
  if (c->stack_bytes) {
    a->sample_type |= PERF_SAMPLE_REGS_USER | PERF_SAMPLE_STACK_USER;
    a->sample_regs_user = pf_regs_mask();
    a->sample_stack_user = c->stack_bytes;
  }
  a->mmap = 1;
  a->mmap2 = 1;
  a->watermark = 1;
}

static const uint64_t ctr_config[PF_NCTR] = {PERF_COUNT_SW_CONTEXT_SWITCHES,
                                             PERF_COUNT_SW_PAGE_FAULTS,
                                             PERF_COUNT_SW_CPU_MIGRATIONS};

/* Keeps event fd: 0, or -errno (an event without an id could neither be
 * told apart in the ring nor known again later). */
static int add_fd(pf_events *ev, int fd, int which, uint64_t *id) {
  if (ioctl(fd, PERF_EVENT_IOC_ID, id) != 0) return -errno;
  if (!ev->nfds && pf_fd_inode(fd, &ev->ev_dev, &ev->ev_ino)) return -errno;
  if (pf_grow((void **)&ev->fds, &ev->cap_fds, ev->nfds + 1, sizeof(pf_evfd)) ||
      pf_grow((void **)&ev->ids, &ev->cap_ids, ev->nids + 1, sizeof(pf_id)))
    return -ENOMEM;
  ev->fds[ev->nfds++] = (pf_evfd){fd, *id};
  ev->ids[ev->nids++] = (pf_id){*id, which};
  return 0;
}

/* Maps the ring of cpu's first event: 256 data pages, halved while the
 * locked-memory limit (perf_event_mlock_kb) refuses it. */
static int map_ring(pf_ring *r, int fd) {
  long page = sysconf(_SC_PAGESIZE);
  for (size_t pages = 256; pages >= 4; pages /= 2) {
    size_t len = (pages + 1) * (size_t)page;
    void *m = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (m != MAP_FAILED) {
      r->fd = fd;
      r->base = m;
      r->len = len;
      r->mask = pages * (size_t)page - 1;
      return 0;
    }
  }
  return -errno;
}

/* Opens one event of thread tid on ring r's CPU and points it at r.
 * 0, or -errno. */
static int open_one(pf_events *ev, pf_ring *r, struct perf_event_attr *a, pid_t tid, int which) {
  long fd = syscall(SYS_perf_event_open, a, tid, r->cpu, -1, PERF_FLAG_FD_CLOEXEC);
  if (fd < 0) return -errno;
  uint64_t id = 0;
  int rc = r->fd < 0 ? map_ring(r, (int)fd)
           : ioctl((int)fd, PERF_EVENT_IOC_SET_OUTPUT, r->fd) != 0 ? -errno : 0;
  if (!rc) rc = add_fd(ev, (int)fd, which, &id);
  if (rc) {
    if (r->fd == (int)fd) {
      munmap(r->base, r->len);
      *r = (pf_ring){.cpu = r->cpu, .fd = -1};
    }
    close((int)fd);
    return rc;
  }
  if (r->fd == (int)fd) r->id = id;
  return 0;
}

/* Opens the events of one thread on every CPU.  0, or -errno of the first
 * sampling event that failed everywhere. */
static int open_thread(pf_events *ev, pid_t tid, int user_only) {
  int opened = 0, err = 0;
  for (size_t c = 0; c < ev->nrings; c++) {
    struct perf_event_attr a;
    sample_attr(&a, &ev->cfg, user_only);
    int rc = open_one(ev, &ev->rings[c], &a, tid, -1);
    if (rc) {
      if (!err && rc != -ENODEV) err = -rc; /* ENODEV: an offline CPU */
      continue;
    }
    opened = 1;
    for (int i = 0; ev->cfg.counters && i < PF_NCTR; i++) {
      struct perf_event_attr k;
      base_attr(&k, user_only);
      k.config = ctr_config[i];
      k.sample_period = 1;
      k.sample_type = PERF_SAMPLE_IDENTIFIER | PERF_SAMPLE_TID | PERF_SAMPLE_TIME;
      open_one(ev, &ev->rings[c], &k, tid, i); /* a counter that fails is left out */
    }
  }
  return opened ? 0 : -(err ? err : ENODEV);
}

static int id_cmp(const void *a, const void *b) {
  uint64_t x = ((const pf_id *)a)->id, y = ((const pf_id *)b)->id;
  return x < y ? -1 : x > y;
}

static int which_of(const pf_events *ev, uint64_t id, int *which) {
  size_t lo = 0, hi = ev->nids;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (ev->ids[mid].id == id) {
      *which = ev->ids[mid].which;
      return 0;
    }
    if (ev->ids[mid].id < id) lo = mid + 1;
    else hi = mid;
  }
  return -1;
}

/* ---- records --------------------------------------------------------------- */
static void keep_sample(pf_events *ev, const uint8_t *p, const uint8_t *end) {
  /* identifier, ip, pid/tid, time, callchain, regs, stack */
  if (end - p < 40) return;
  uint32_t pid, tid;
  uint64_t time, nr;
  memcpy(&pid, p + 16, 4);
  memcpy(&tid, p + 20, 4);
  memcpy(&time, p + 24, 8);
  memcpy(&nr, p + 32, 8);
  p += 40;
  if ((pid_t)pid != ev->pid || nr > (uint64_t)(end - p) / 8) return;
  const uint8_t *chain = p;
  p += nr * 8;
  const uint8_t *regs = NULL, *stack = NULL;
  uint64_t nregs = 0, slen = 0;
  if (ev->cfg.stack_bytes) {
    uint64_t abi = 0, size = 0, dyn = 0;
    if (end - p < 8) return;
    memcpy(&abi, p, 8);
    p += 8;
    if (abi) {
      nregs = (uint64_t)__builtin_popcountll(pf_regs_mask());
      if ((uint64_t)(end - p) < nregs * 8) return;
      regs = p;
      p += nregs * 8;
    }
    if (end - p < 8) return;
    memcpy(&size, p, 8);
    p += 8;
    if (size) {
      if ((uint64_t)(end - p) < size + 8) return;
      stack = p;
      memcpy(&dyn, p + size, 8);
      slen = dyn < size ? dyn : size;
    }
  }
  pf_sample h = {.time = time, .tid = tid, .nchain = (uint32_t)nr, .nregs = (uint32_t)nregs,
                 .stack_len = (uint32_t)slen};
  int rc = pf_store_add(ev->store, &h, chain, regs, stack);
  if (rc > 0) ev->capped++;
  else if (rc < 0) ev->oom++;
}

static void keep_tick(pf_events *ev, int which, const uint8_t *p, const uint8_t *end) {
  if (end - p < 24) return;
  uint32_t pid, tid;
  uint64_t time;
  memcpy(&pid, p + 8, 4);
  memcpy(&tid, p + 12, 4);
  memcpy(&time, p + 16, 8);
  if ((pid_t)pid != ev->pid) return;
  if (pf_grow((void **)&ev->ticks, &ev->cap_ticks, ev->nticks + 1, sizeof(pf_tick))) {
    ev->oom++;
    return;
  }
  ev->ticks[ev->nticks++] = (pf_tick){time, tid, (uint8_t)which};
}

static void keep_map(pf_events *ev, uint64_t start, uint64_t len, uint64_t pgoff, const char *path,
                     size_t n) {
  char *s = strndup(path, n);
  pthread_mutex_lock(&ev->maps_mu);
  if (!s || pf_grow((void **)&ev->maps, &ev->cap_maps, ev->nmaps + 1, sizeof(pf_map))) {
    ev->oom++;
    free(s);
  } else {
    ev->maps[ev->nmaps++] = (pf_map){start, start + len, pgoff, s};
  }
  pthread_mutex_unlock(&ev->maps_mu);
}

static void one_record(pf_events *ev, const uint8_t *rec, size_t size) {
  const struct perf_event_header *h = (const void *)rec;
  const uint8_t *p = rec + sizeof *h, *end = rec + size;
  if (h->type == PERF_RECORD_SAMPLE) {
    uint64_t id;
    if (end - p < 8) return;
    memcpy(&id, p, 8);
    int which;
    if (which_of(ev, id, &which)) return;
    if (which < 0) keep_sample(ev, p, end);
    else keep_tick(ev, which, p, end);
  } else if (h->type == PERF_RECORD_MMAP2 && end - p > 64) {
    /* pid tid addr len pgoff maj min ino ino_generation prot flags filename */
    uint32_t pid;
    uint64_t addr, len, pgoff;
    uint32_t prot;
    memcpy(&pid, p, 4);
    memcpy(&addr, p + 8, 8);
    memcpy(&len, p + 16, 8);
    memcpy(&pgoff, p + 24, 8);
    memcpy(&prot, p + 56, 4);
    const char *name = (const char *)p + 64;
    size_t n = strnlen(name, (size_t)(end - p - 64));
    if ((pid_t)pid == ev->pid && (prot & PROT_EXEC)) keep_map(ev, addr, len, pgoff, name, n);
  } else if (h->type == PERF_RECORD_LOST && end - p >= 16) {
    uint64_t lost;
    memcpy(&lost, p + 8, 8);
    ev->lost += lost;
  }
}

/* Copies ring r's new records out: 1 when there were any. */
static int drain(pf_events *ev, pf_ring *r) {
  struct perf_event_mmap_page *mp = r->base;
  uint64_t head = __atomic_load_n(&mp->data_head, __ATOMIC_ACQUIRE);
  uint64_t tail = mp->data_tail, tail0 = tail;
  const uint8_t *data = (const uint8_t *)r->base + mp->data_offset;
  if (!mp->data_offset) data = (const uint8_t *)r->base + sysconf(_SC_PAGESIZE);
  while (tail + sizeof(struct perf_event_header) <= head) {
    struct perf_event_header h;
    size_t at = (size_t)(tail & r->mask), room = r->mask + 1 - at;
    if (room >= sizeof h) {
      memcpy(&h, data + at, sizeof h);
    } else {
      memcpy(&h, data + at, room);
      memcpy((uint8_t *)&h + room, data, sizeof h - room);
    }
    if (h.size < sizeof h || tail + h.size > head) break;
    const uint8_t *rec = data + at;
    if (room < h.size) { /* wraps the end of the ring */
      if (pf_grow((void **)&ev->tmp, &ev->cap_tmp, h.size, 1)) {
        ev->oom++;
        tail += h.size;
        continue;
      }
      memcpy(ev->tmp, data + at, room);
      memcpy(ev->tmp + room, data, h.size - room);
      rec = ev->tmp;
    }
    one_record(ev, rec, h.size);
    tail += h.size;
  }
  __atomic_store_n(&mp->data_tail, tail, __ATOMIC_RELEASE);
  return tail != tail0;
}

/* The reader's poll set: each ring's event, then the wake pipe. */
static struct pollfd *poll_set(pf_events *ev) {
  struct pollfd *pf = calloc(ev->nrings + 1, sizeof *pf);
  for (size_t i = 0; pf && i < ev->nrings; i++)
    pf[i] = (struct pollfd){ev->rings[i].base ? ev->rings[i].fd : -1, POLLIN, 0};
  if (pf) pf[ev->nrings] = (struct pollfd){ev->wake.rd, POLLIN, 0};
  return pf;
}

/* Descriptors poll would keep waking on for nothing are no longer polled:
 * one the program closed (POLLNVAL) or took for a file of its own (readable
 * with no record, and not the event any more), an event whose thread ended
 * (POLLHUP).  The ring stays mapped and is still read at each wake. */
static void prune(pf_events *ev, struct pollfd *pf, const int *got) {
  for (size_t i = 0; i < ev->nrings; i++)
    if (pf[i].fd >= 0 && pf[i].revents &&
        ((pf[i].revents & (POLLNVAL | POLLHUP | POLLERR)) ||
         (!got[i] && !pf_fd_is_event(pf[i].fd, ev->ev_dev, ev->ev_ino, ev->rings[i].id))))
      pf[i].fd = -1;
  struct pollfd *w = &pf[ev->nrings];
  if (w->fd >= 0 && w->revents && ((w->revents & POLLNVAL) || !pf_wake_ours(&ev->wake, w->fd)))
    w->fd = -1;
}

static void *reader_main(void *arg) {
  pf_events *ev = arg;
  ev->reader_tid = (pid_t)syscall(SYS_gettid);
  atomic_store(&ev->reader_ready, 1);
  struct pollfd *pf = poll_set(ev);
  int *got = calloc(ev->nrings + 1, sizeof *got);
  while (!atomic_load(&ev->stop)) {
    if (pf && got) poll(pf, ev->nrings + 1, 20);
    else {
      struct timespec ts = {0, 20000000};
      nanosleep(&ts, NULL);
    }
    for (size_t i = 0; i < ev->nrings; i++)
      if (ev->rings[i].base) {
        int g = drain(ev, &ev->rings[i]);
        if (got) got[i] = g;
      }
    if (pf && got) prune(ev, pf, got);
  }
  free(got);
  free(pf);
  return NULL;
}

/* ---- start / stop -------------------------------------------------------- */
static void read_maps(pf_events *ev) {
  FILE *f = fopen("/proc/self/maps", "r");
  if (!f) return;
  char line[4352];
  while (fgets(line, sizeof line, f)) {
    unsigned long long s, e, off;
    char perm[8];
    int pos = 0;
    if (sscanf(line, "%llx-%llx %7s %llx %*s %*s%n", &s, &e, perm, &off, &pos) < 4) continue;
    if (perm[2] != 'x') continue;
    char *p = line + pos;
    while (*p == ' ') p++;
    size_t n = strcspn(p, "\n");
    if (!n) continue;
    keep_map(ev, s, e - s, off, p, n);
  }
  fclose(f);
}

static int list_threads(pid_t **out, size_t *n) {
  DIR *d = opendir("/proc/self/task");
  if (!d) return -1;
  size_t cap = 0;
  *n = 0;
  *out = NULL;
  struct dirent *de;
  while ((de = readdir(d))) {
    if (de->d_name[0] < '0' || de->d_name[0] > '9') continue;
    if (pf_grow((void **)out, &cap, *n + 1, sizeof(pid_t))) break;
    (*out)[(*n)++] = (pid_t)atoi(de->d_name);
  }
  closedir(d);
  return 0;
}

static void why_open(char *why, size_t n, int err, int paranoid) {
  if (err == ENOSYS)
    snprintf(why, n, "perf_event_open is not available (kernel without CONFIG_PERF_EVENTS, "
                     "or a seccomp filter blocks it)");
  else if (err == EACCES || err == EPERM)
    snprintf(why, n, "perf_event_open refused (%s): kernel.perf_event_paranoid is %d; "
                     "`sysctl kernel.perf_event_paranoid=2` (or lower) allows user-space "
                     "sampling of one's own processes, or run with CAP_PERFMON",
             strerror(err), paranoid);
  else if (err == ENOENT || err == ENODEV || err == EOPNOTSUPP)
    snprintf(why, n, "the cpu-clock software event is not supported here (%s)", strerror(err));
  else
    snprintf(why, n, "perf_event_open(cpu-clock) failed: %s", strerror(err));
}

static int fd_ours(const pf_events *ev, const pf_evfd *f) {
  return f->fd >= 0 && pf_fd_is_event(f->fd, ev->ev_dev, ev->ev_ino, f->id);
}

/* Each event still the backend's is disabled; the others are counted
 * gone (the program closed them) and left alone. */
static void disable_all(pf_events *ev) {
  for (size_t i = 0; i < ev->nfds; i++) {
    if (fd_ours(ev, &ev->fds[i])) {
      ioctl(ev->fds[i].fd, PERF_EVENT_IOC_DISABLE, 0);
    } else {
      ev->fds[i].fd = -1;
      ev->gone++;
    }
  }
}

int pf_events_start(pf_events **out, const pf_config *cfg, int *user_only, int *paranoid,
                    char *why, size_t why_len) {
  pf_events *ev = calloc(1, sizeof *ev);
  long ncpu = sysconf(_SC_NPROCESSORS_CONF);
  if (ncpu < 1) ncpu = 1;
  if (ev) ev->rings = calloc((size_t)ncpu, sizeof *ev->rings);
  if (!ev || !ev->rings) {
    free(ev);
    snprintf(why, why_len, "out of memory");
    return -1;
  }
  ev->nrings = (size_t)ncpu;
  ev->wake = (pf_wake){.rd = -1, .wr = -1};
  for (size_t c = 0; c < ev->nrings; c++) ev->rings[c] = (pf_ring){.cpu = (int)c, .fd = -1};
  ev->cfg = *cfg;
  pthread_mutex_init(&ev->maps_mu, NULL);
  /* the worker before the events: a thread alive at start is sampled
   * (its samples are left out by its thread id, as the reader's) */
  ev->store = pf_store_new(ev, cfg->memory_cap, cfg->unwind, cfg->unwind_ud);
  if (!ev->store) {
    pthread_mutex_destroy(&ev->maps_mu);
    free(ev->rings);
    free(ev);
    snprintf(why, why_len, "out of memory");
    return -1;
  }
  ev->pid = getpid();
  *paranoid = read_paranoid();
  *user_only = 0;
  read_maps(ev);
  pid_t *tids = NULL;
  size_t ntids = 0;
  list_threads(&tids, &ntids);
  int err = 0;
  for (size_t i = 0; i < ntids; i++) {
    int rc = open_thread(ev, tids[i], *user_only);
    if ((rc == -EACCES || rc == -EPERM) && !*user_only && !ev->nthreads) {
      *user_only = 1; /* perf_event_paranoid: user space only */
      rc = open_thread(ev, tids[i], 1);
    }
    if (rc == 0) ev->nthreads++;
    else if (!err) err = -rc;
  }
  free(tids);
  if (!ev->nthreads) {
    why_open(why, why_len, err ? err : ESRCH, *paranoid);
    pf_events_free(ev);
    return -1;
  }
  qsort(ev->ids, ev->nids, sizeof *ev->ids, id_cmp);
  (void)pf_wake_open(&ev->wake); /* without it, stop waits for the reader's next poll */
  /* The reader starts after the events are open: it inherits them, and its
   * own samples and counts are left out by its thread id. */
  if (pthread_create(&ev->reader, NULL, reader_main, ev) == 0) ev->have_reader = 1;
  while (ev->have_reader && !atomic_load(&ev->reader_ready)) sched_yield();
  for (size_t i = 0; i < ev->nfds; i++) ioctl(ev->fds[i].fd, PERF_EVENT_IOC_ENABLE, 0);
  *out = ev;
  return 0;
}

static int tick_cmp(const void *a, const void *b) {
  uint64_t x = ((const pf_tick *)a)->time, y = ((const pf_tick *)b)->time;
  return x < y ? -1 : x > y;
}

void pf_events_stop(pf_events *ev) {
  if (!ev) return;
  disable_all(ev);
  atomic_store(&ev->stop, 1);
  pf_wake_ring(&ev->wake);
  if (ev->have_reader) pthread_join(ev->reader, NULL);
  ev->have_reader = 0;
  for (size_t i = 0; i < ev->nrings; i++)
    if (ev->rings[i].base) drain(ev, &ev->rings[i]);
  /* The rings are drained one after the other, so ticks of a thread that
   * moved between CPUs are out of time order; counted in that order, the
   * cumulative counts would go backwards on the timeline. */
  if (ev->nticks > 1) qsort(ev->ticks, ev->nticks, sizeof *ev->ticks, tick_cmp);
  pf_store_stop(ev->store); /* its worker, after the last samples were handed to it */
}

void pf_events_free(pf_events *ev) {
  if (!ev) return;
  if (ev->have_reader) pf_events_stop(ev);
  pf_store_stop(ev->store); /* before the maps it reads go */
  for (size_t i = 0; i < ev->nrings; i++)
    if (ev->rings[i].base) munmap(ev->rings[i].base, ev->rings[i].len);
  for (size_t i = 0; i < ev->nfds; i++)
    if (fd_ours(ev, &ev->fds[i])) close(ev->fds[i].fd);
  pf_wake_close(&ev->wake);
  free(ev->fds);
  free(ev->ids);
  for (size_t i = 0; i < ev->nmaps; i++) free(ev->maps[i].path);
  free(ev->rings);
  free(ev->maps);
  pf_store_free(ev->store);
  pthread_mutex_destroy(&ev->maps_mu);
  free(ev->ticks);
  free(ev->tmp);
  free(ev);
}

size_t pf_events_nsamples(const pf_events *ev) { return pf_store_n(ev->store); }
const pf_sample *pf_events_sample(const pf_events *ev, size_t i) {
  return pf_store_at(ev->store, i);
}
int pf_events_own(const pf_events *ev, uint32_t tid) {
  return (pid_t)tid == ev->reader_tid || (pid_t)tid == pf_store_worker_tid(ev->store);
}

int pf_events_maps_copy(pf_events *ev, pf_map **maps, size_t *n) {
  pthread_mutex_lock(&ev->maps_mu);
  *n = ev->nmaps;
  *maps = malloc((*n ? *n : 1) * sizeof **maps);
  if (*maps && *n) memcpy(*maps, ev->maps, *n * sizeof **maps);
  pthread_mutex_unlock(&ev->maps_mu);
  return *maps ? 0 : -1;
}

size_t pf_events_nmaps(pf_events *ev) {
  pthread_mutex_lock(&ev->maps_mu);
  size_t n = ev->nmaps;
  pthread_mutex_unlock(&ev->maps_mu);
  return n;
}

const pf_tick *pf_events_ticks(const pf_events *ev, size_t *n) {
  *n = ev->nticks;
  return ev->ticks;
}
uint64_t pf_events_oom(const pf_events *ev) { return ev->oom; }
uint64_t pf_events_lost(const pf_events *ev, uint64_t *capped) {
  *capped = ev->capped;
  return ev->lost;
}
size_t pf_events_threads(const pf_events *ev) { return ev->nthreads; }
size_t pf_events_gone(const pf_events *ev, size_t *opened) {
  *opened = ev->nfds;
  return ev->gone;
}
