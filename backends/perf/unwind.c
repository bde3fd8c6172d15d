/*
 * unwind.c - call stacks and names for the stored samples, after
 * recording, with elfutils' libdw (libdwfl): it reads ELF symbol tables,
 * separate debug files and DWARF call-frame information, which is what
 * unwinding Debian's libraries needs (they have no frame pointers).
 *
 * The address space is rebuilt from the mappings seen (/proc/self/maps at
 * start and the kernel's mmap records after), so code unloaded before the
 * end still resolves.  Each sample is unwound by dwfl_getthread_frames over
 * its copied registers and user stack; memory outside the copy reads as
 * unknown, which ends the walk.  A sample without a copy, or whose DWARF
 * walk gives no more than the leaf, uses the kernel's frame-pointer chain.
 * Names come from the symbol table, else from the DWARF subprogram around
 * the address; a frame that has neither keeps its module and offset.
 */
#define _GNU_SOURCE
#include <elfutils/libdwfl.h>
#include <dwarf.h>
#include <fcntl.h>
#include <gelf.h>
#include <linux/perf_event.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "perf.h"
#include "symidx.h"

#define MAX_FRAMES 256

typedef struct sym_ent {
  uint64_t pc;
  char *line; /* "function\tmodule\t0xOFF" */
} sym_ent;

struct pf_unwinder {
  Dwfl *dwfl;
  int attached;
  int self_fd;    /* /proc/self/exe, whose ELF header names the architecture */
  uint64_t self_dev, self_ino;
  Elf *self_elf;
  const pf_map *maps;
  size_t nmaps;
  /* the sample being unwound */
  const pf_sample *cur;
  const uint64_t *regs;
  const uint8_t *stack;
  uint64_t pcs[MAX_FRAMES];
  uint64_t cut;                /* samples whose stacks reached MAX_FRAMES */
  size_t npcs;
  /* pc -> frame text */
  sym_ent *tab;
  size_t ntab, cap_tab;
  uint64_t sym_ns, unwind_ns, dwarf_ok, used_fp;
  uint64_t names_indexed, names_dwfl, names_mismatched;
  int check_names; /* LOOM_PERF_CHECK_NAMES=1: every indexed name checked against libdwfl */
  /* kernel symbols (kallsyms.c), read at the first kernel address */
  pf_ksyms *ksyms;
  int ksyms_read;
};

static const char *kernel_name(pf_unwinder *u, uint64_t pc) {
  if (!u->ksyms_read) {
    u->ksyms_read = 1;
    u->ksyms = pf_ksyms_get();
  }
  return pf_ksyms_name(u->ksyms, pc);
}

static uint64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* ---- address space -------------------------------------------------------- */
/* The load bias of path mapped at start from file offset pgoff: the
 * PT_LOAD holding that offset says which virtual address it has. */
static int load_bias(const char *path, uint64_t start, uint64_t pgoff, uint64_t *bias) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  Elf *e = elf_begin(fd, ELF_C_READ_MMAP, NULL);
  int rc = -1;
  size_t n = 0;
  if (e && elf_kind(e) == ELF_K_ELF && elf_getphdrnum(e, &n) == 0) {
    for (size_t i = 0; i < n; i++) {
      GElf_Phdr ph;
      if (!gelf_getphdr(e, (int)i, &ph) || ph.p_type != PT_LOAD) continue;
      uint64_t page = ph.p_align > 1 ? ph.p_align : 4096;
      uint64_t off0 = ph.p_offset & ~(page - 1);
      if (pgoff < off0 || pgoff >= ph.p_offset + ph.p_filesz) continue;
      GElf_Ehdr eh;
      if (gelf_getehdr(e, &eh) && eh.e_type == ET_EXEC) *bias = 0;
      else *bias = start - ((ph.p_vaddr - ph.p_offset) + pgoff); /* wraps as intended */
      rc = 0;
      break;
    }
  }
  if (e) elf_end(e);
  close(fd);
  return rc;
}

static int overlaps(const pf_map *a, const pf_map *b) {
  return a->start < b->end && b->start < a->end;
}

/* A module's symbol index goes with it (dwfl_getmodules' callback). */
static int free_index(Dwfl_Module *m, void **slot, const char *name, Dwarf_Addr start, void *arg) {
  (void)m, (void)name, (void)start, (void)arg;
  pf_symidx_free(*slot);
  *slot = NULL;
  return DWARF_CB_OK;
}

/* A module not reported again (its mapping replaced): dwfl_report_end's
 * callback, which is passed the module's user data slot too. */
static int module_gone(Dwfl_Module *m, void *slot, const char *name, Dwarf_Addr start,
                       void *arg) {
  return free_index(m, slot, name, start, arg);
}

/* File path at bias, reported to libdwfl on a descriptor of the backend's
 * (fds.c: known again before dwfl_end closes it). */
static void report_one(pf_unwinder *u, const char *path, uint64_t bias) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return;
  pf_held_add(fd);
  if (!dwfl_report_elf(u->dwfl, path, path, fd, bias, true)) { /* not taken */
    pf_held_forget(fd);
    close(fd);
  }
}

/* Later mappings win over earlier ones they overlap (an address reused
 * after an unload); each remaining file is reported once per bias. */
static void report_maps(pf_unwinder *u) {
  char *keep = calloc(u->nmaps ? u->nmaps : 1, 1);
  if (!keep) return;
  for (size_t i = u->nmaps; i-- > 0;) {
    keep[i] = u->maps[i].path[0] == '/';
    for (size_t j = i + 1; keep[i] && j < u->nmaps; j++)
      if (keep[j] && overlaps(&u->maps[i], &u->maps[j])) keep[i] = 0;
  }
  dwfl_report_begin(u->dwfl);
  for (size_t i = 0; i < u->nmaps; i++) {
    if (!keep[i]) continue;
    uint64_t bias;
    if (load_bias(u->maps[i].path, u->maps[i].start, u->maps[i].pgoff, &bias)) continue;
    int dup = 0;
    for (size_t j = 0; j < i && !dup; j++) {
      uint64_t b2;
      dup = keep[j] && !strcmp(u->maps[j].path, u->maps[i].path) &&
            !load_bias(u->maps[j].path, u->maps[j].start, u->maps[j].pgoff, &b2) && b2 == bias;
    }
    if (!dup) report_one(u, u->maps[i].path, bias);
  }
  dwfl_report_end(u->dwfl, module_gone, NULL);
  free(keep);
}

int pf_unwinder_maps(pf_unwinder *u, const pf_map *maps, size_t nmaps) {
  size_t old = u->nmaps;
  for (size_t i = old; i < nmaps; i++) /* an address reused: only a new address space will do */
    for (size_t j = 0; j < old; j++)
      if (maps[i].path[0] == '/' && maps[j].path[0] == '/' && overlaps(&maps[i], &maps[j]) &&
          (strcmp(maps[i].path, maps[j].path) || maps[i].start - maps[i].pgoff !=
                                                     maps[j].start - maps[j].pgoff))
        return -1;
  u->maps = maps;
  u->nmaps = nmaps;
  /* Only added: a report from the start (dwfl_report_begin) after
   * dwfl_attach_state leaves libdwfl unable to unwind (measured: elfutils
   * 0.188 fell back to frame pointers for 1459 of 1655 samples). */
  dwfl_report_begin_add(u->dwfl);
  for (size_t i = old; i < nmaps; i++) {
    uint64_t bias;
    if (maps[i].path[0] != '/' ||
        load_bias(maps[i].path, maps[i].start, maps[i].pgoff, &bias))
      continue;
    report_one(u, maps[i].path, bias);
  }
  dwfl_report_end(u->dwfl, module_gone, NULL);
  return 0;
}

/* ---- thread callbacks over the copied registers and stack ----------------- */
static pid_t cb_next_thread(Dwfl *dwfl, void *arg, void **thread_arg) {
  (void)dwfl;
  pf_unwinder *u = arg;
  if (*thread_arg) return 0;
  *thread_arg = u;
  return u->cur ? (pid_t)u->cur->tid : 0;
}

static bool cb_get_thread(Dwfl *dwfl, pid_t tid, void *arg, void **thread_arg) {
  (void)dwfl;
  (void)tid;
  *thread_arg = arg;
  return true;
}

static bool cb_memory_read(Dwfl *dwfl, Dwarf_Addr addr, Dwarf_Word *result, void *arg) {
  (void)dwfl;
  pf_unwinder *u = arg;
  uint64_t sp = u->regs[7]; /* perf order: ax bx cx dx si di bp sp ip r8-r15 */
  if (addr < sp || addr - sp + 8 > u->cur->stack_len) return false;
  memcpy(result, u->stack + (addr - sp), 8);
  return true;
}

static bool cb_set_regs(Dwfl_Thread *thread, void *arg) {
  pf_unwinder *u = arg;
  const uint64_t *r = u->regs;
  /* DWARF x86-64 numbers: rax rdx rcx rbx rsi rdi rbp rsp r8-r15 rip */
  Dwarf_Word d[17] = {r[0], r[3], r[2], r[1], r[4], r[5], r[6], r[7],
                      r[9], r[10], r[11], r[12], r[13], r[14], r[15], r[16], r[8]};
  return dwfl_thread_state_registers(thread, 0, 17, d);
}

static const Dwfl_Thread_Callbacks thread_cbs = {
    .next_thread = cb_next_thread,
    .get_thread = cb_get_thread,
    .memory_read = cb_memory_read,
    .set_initial_registers = cb_set_regs,
};

static int frame_cb(Dwfl_Frame *state, void *arg) {
  pf_unwinder *u = arg;
  Dwarf_Addr pc;
  bool act;
  if (!dwfl_frame_pc(state, &pc, &act)) return DWARF_CB_ABORT;
  if (!act && pc) pc--; /* a return address: the call is the byte before */
  u->pcs[u->npcs++] = pc;
  return u->npcs < MAX_FRAMES ? DWARF_CB_OK : DWARF_CB_ABORT;
}

/* libdwfl's search for a separate debug file, whose descriptor libdwfl
 * then keeps: noted (fds.c). */
static int find_debuginfo(Dwfl_Module *m, void **ud, const char *name, Dwarf_Addr base,
                          const char *file, const char *link, GElf_Word crc, char **path) {
  int fd = dwfl_standard_find_debuginfo(m, ud, name, base, file, link, crc, path);
  if (fd >= 0) pf_held_add(fd);
  return fd;
}

pf_unwinder *pf_unwinder_new(const pf_map *maps, size_t nmaps, char *why, size_t why_len) {
  static char *debuginfo_path = NULL;
  static const Dwfl_Callbacks cbs = {
      .find_elf = dwfl_build_id_find_elf,
      .find_debuginfo = find_debuginfo,
      .debuginfo_path = &debuginfo_path,
  };
  elf_version(EV_CURRENT);
  pf_unwinder *u = calloc(1, sizeof *u);
  if (!u) {
    snprintf(why, why_len, "out of memory");
    return NULL;
  }
  u->maps = maps;
  u->nmaps = nmaps;
  u->self_fd = -1;
  const char *chk = getenv("LOOM_PERF_CHECK_NAMES");
  u->check_names = chk && *chk == '1';
  u->dwfl = dwfl_begin(&cbs);
  if (!u->dwfl) {
    snprintf(why, why_len, "libdw: %s", dwfl_errmsg(-1));
    free(u);
    return NULL;
  }
  report_maps(u);
  /* The architecture from a file of our own: given none, libdwfl borrows
   * the first module's, which goes if a report drops that module. */
  u->self_fd = open("/proc/self/exe", O_RDONLY | O_CLOEXEC);
  if (u->self_fd >= 0 && pf_fd_inode(u->self_fd, &u->self_dev, &u->self_ino)) {
    close(u->self_fd);
    u->self_fd = -1;
  }
  u->self_elf = u->self_fd >= 0 ? elf_begin(u->self_fd, ELF_C_READ_MMAP, NULL) : NULL;
  u->attached = dwfl_attach_state(u->dwfl, u->self_elf, getpid(), &thread_cbs, u);
  if (!u->attached) snprintf(why, why_len, "libdw cannot unwind here: %s", dwfl_errmsg(-1));
  return u;
}

/* libdwfl's state ends with it closing the descriptors it holds: only while
 * each is still the file it opened.  Where the program closed one (and may
 * have a file of its own at that number now), the state is left as it is,
 * a leak, and only the descriptors still the backend's are closed. */
void pf_unwinder_free(pf_unwinder *u) {
  if (!u) return;
  int intact = pf_held_intact();
  if (u->dwfl && intact) {
    dwfl_getmodules(u->dwfl, free_index, NULL, 0);
    dwfl_end(u->dwfl);
  }
  pf_held_release(!intact);
  if (u->self_elf) elf_end(u->self_elf);
  if (pf_fd_same(u->self_fd, u->self_dev, u->self_ino)) close(u->self_fd);
  for (size_t i = 0; i < u->cap_tab; i++) free(u->tab[i].line);
  pf_ksyms_free(u->ksyms);
  free(u->tab);
  free(u);
}

void pf_unwinder_stats(const pf_unwinder *u, uint64_t *distinct, uint64_t *sym_ns,
                       uint64_t *unwind_ns, uint64_t *reached_dwarf, uint64_t *used_fp) {
  *distinct = u->ntab;
  *sym_ns = u->sym_ns;
  *unwind_ns = u->unwind_ns;
  *reached_dwarf = u->dwarf_ok;
  *used_fp = u->used_fp;
}

void pf_unwinder_names(const pf_unwinder *u, uint64_t *indexed, uint64_t *dwfl,
                       int64_t *mismatched) {
  *indexed = u->names_indexed;
  *dwfl = u->names_dwfl;
  *mismatched = u->check_names ? (int64_t)u->names_mismatched : -1;
}

const char *pf_unwinder_ksyms(const pf_unwinder *u) {
  return !u->ksyms_read ? "unread" : !u->ksyms || !u->ksyms->n ? "none"
                                   : u->ksyms->from_cache ? "cache" : "kallsyms";
}

uint64_t pf_unwinder_cut(const pf_unwinder *u, unsigned *max_frames) {
  *max_frames = MAX_FRAMES;
  return u->cut;
}

/* ---- names ------------------------------------------------------------------ */
/* The innermost DWARF subprogram (or inlined routine) around pc. */
static const char *dwarf_name(Dwfl_Module *m, uint64_t pc) {
  Dwarf_Addr bias;
  Dwarf_Die *cu = dwfl_module_addrdie(m, pc, &bias);
  if (!cu) return NULL;
  Dwarf_Die *scopes = NULL;
  int n = dwarf_getscopes(cu, pc - bias, &scopes);
  const char *name = NULL;
  for (int i = 0; i < n && !name; i++) {
    int tag = dwarf_tag(&scopes[i]);
    if (tag == DW_TAG_subprogram || tag == DW_TAG_inlined_subroutine) {
      Dwarf_Attribute a;
      name = dwarf_formstring(dwarf_attr_integrate(&scopes[i], DW_AT_linkage_name, &a));
      if (!name) name = dwarf_diename(&scopes[i]);
    }
  }
  free(scopes);
  return name;
}

/* dwfl_module_addrinfo's name for pc, from the module's index when it can
 * tell (symidx.c), checked against libdwfl under LOOM_PERF_CHECK_NAMES=1. */
static const char *symbol_name(pf_unwinder *u, Dwfl_Module *m, uint64_t pc) {
  void **slot;
  dwfl_module_info(m, &slot, NULL, NULL, NULL, NULL, NULL, NULL);
  if (!*slot) *slot = pf_symidx_build(m);
  const char *fn = NULL;
  GElf_Sym sym;
  GElf_Off soff;
  if (pf_symidx_lookup(*slot, pc, &fn) >= 0) {
    u->names_indexed++;
    if (u->check_names) {
      const char *want = dwfl_module_addrinfo(m, pc, &soff, &sym, NULL, NULL, NULL);
      if (!want != !fn || (fn && strcmp(fn, want))) u->names_mismatched++;
    }
    return fn;
  }
  u->names_dwfl++;
  return dwfl_module_addrinfo(m, pc, &soff, &sym, NULL, NULL, NULL);
}

static char *name_pc(pf_unwinder *u, uint64_t pc) {
  const char *fn = NULL, *mod = NULL;
  uint64_t off = pc;
  char buf[64];
  Dwfl_Module *m = u->dwfl ? dwfl_addrmodule(u->dwfl, pc) : NULL;
  if (m) {
    Dwarf_Addr start;
    mod = dwfl_module_info(m, NULL, &start, NULL, NULL, NULL, NULL, NULL);
    fn = symbol_name(u, m, pc);
    if (!fn) fn = dwarf_name(m, pc);
    Dwarf_Addr bias = 0;
    if (dwfl_module_getelf(m, &bias)) off = pc - bias;
  } else {
    for (size_t i = u->nmaps; i-- > 0;)
      if (pc >= u->maps[i].start && pc < u->maps[i].end) {
        mod = u->maps[i].path;
        off = pc - u->maps[i].start + u->maps[i].pgoff;
        break;
      }
  }
  if (!mod && pc >= 0xffff800000000000ull) {
    mod = "[kernel]";
    fn = kernel_name(u, pc);
  }
  if (!mod) {
    snprintf(buf, sizeof buf, "[unknown]");
    mod = buf;
  }
  char *line = NULL;
  if (asprintf(&line, "%s\t%s\t0x%llx", fn ? fn : "", mod, (unsigned long long)off) < 0)
    return NULL;
  for (char *p = line; *p; p++) /* names never break the text's lines */
    if (*p == '\n') *p = ' ';
  return line;
}

/* The frame text of pc, from the cache (open addressing on pc). */
static const char *frame_line(pf_unwinder *u, uint64_t pc) {
  if (u->ntab * 2 >= u->cap_tab) {
    size_t nc = u->cap_tab ? u->cap_tab * 2 : 1024;
    sym_ent *nt = calloc(nc, sizeof *nt);
    if (!nt) return NULL;
    for (size_t i = 0; i < u->cap_tab; i++) {
      if (!u->tab[i].line) continue;
      size_t h = (size_t)(u->tab[i].pc * 0x9e3779b97f4a7c15ull) & (nc - 1);
      while (nt[h].line) h = (h + 1) & (nc - 1);
      nt[h] = u->tab[i];
    }
    free(u->tab);
    u->tab = nt;
    u->cap_tab = nc;
  }
  size_t h = (size_t)(pc * 0x9e3779b97f4a7c15ull) & (u->cap_tab - 1);
  while (u->tab[h].line) {
    if (u->tab[h].pc == pc) return u->tab[h].line;
    h = (h + 1) & (u->cap_tab - 1);
  }
  uint64_t t0 = now_ns();
  char *line = name_pc(u, pc);
  u->sym_ns += now_ns() - t0;
  if (!line) return NULL;
  u->tab[h] = (sym_ent){pc, line};
  u->ntab++;
  return line;
}

static int append(char **buf, size_t *cap, size_t *len, const char *s) {
  size_t n = strlen(s);
  if (*len + n + 2 > *cap) {
    size_t c = *cap ? *cap * 2 : 1024;
    while (c < *len + n + 2) c *= 2;
    char *p = realloc(*buf, c);
    if (!p) return -1;
    *buf = p;
    *cap = c;
  }
  if (*len) (*buf)[(*len)++] = '\n';
  memcpy(*buf + *len, s, n + 1);
  *len += n;
  return 0;
}

/* The kernel's chain: kernel part (when allowed) then the frame-pointer
 * user part; the PERF_CONTEXT_* marks are skipped. */
static void chain_pcs(pf_unwinder *u, const uint64_t *chain, size_t n, int user_too) {
  int user = 0;
  for (size_t i = 0; i < n && u->npcs < MAX_FRAMES; i++) {
    if (chain[i] >= PERF_CONTEXT_MAX) {
      user = chain[i] == PERF_CONTEXT_USER;
      if (user && !user_too) return;
      continue;
    }
    uint64_t pc = chain[i];
    if (user && i > 0 && chain[i - 1] < PERF_CONTEXT_MAX && pc) pc--; /* return addresses */
    u->pcs[u->npcs++] = pc;
  }
}

size_t pf_unwind_pcs(pf_unwinder *u, const pf_sample *s, const uint64_t **pcs) {
  const uint8_t *data = s->raw;
  const uint64_t *chain = (const uint64_t *)(const void *)data;
  u->npcs = 0;
  uint64_t t0 = now_ns();
  int dwarf = 0;
  if (u->attached && s->nregs >= 17 && s->stack_len) {
    chain_pcs(u, chain, s->nchain, 0); /* the kernel's frames first */
    size_t nk = u->npcs;
    u->cur = s;
    u->regs = (const uint64_t *)(const void *)(data + (size_t)s->nchain * 8);
    u->stack = data + (size_t)s->nchain * 8 + (size_t)s->nregs * 8;
    dwfl_getthread_frames(u->dwfl, (pid_t)s->tid, frame_cb, u);
    u->cur = NULL;
    dwarf = u->npcs > nk + 1;
    if (!dwarf) u->npcs = 0;
  }
  if (dwarf) u->dwarf_ok++;
  else {
    chain_pcs(u, chain, s->nchain, 1);
    u->used_fp++;
  }
  u->unwind_ns += now_ns() - t0;
  if (u->npcs >= MAX_FRAMES) u->cut++;
  *pcs = u->pcs;
  return u->npcs;
}

int pf_stack_text(pf_unwinder *u, const uint64_t *pcs, size_t n, char **buf, size_t *cap,
                  size_t *len) {
  *len = 0;
  for (size_t i = 0; i < n; i++) {
    const char *line = frame_line(u, pcs[i]);
    if (!line || append(buf, cap, len, line)) return -1;
  }
  return 0;
}

void pf_unwinder_name(pf_unwinder *u, const uint64_t *pcs, size_t n) {
  for (size_t i = 0; i < n; i++) (void)frame_line(u, pcs[i]);
}
