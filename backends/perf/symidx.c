/*
 * symidx.c - a module's symbol table sorted by address, so that naming a
 * frame is a binary search instead of dwfl_module_addrinfo's scan of every
 * symbol (libtorch's table: some 10^5 symbols, 0.3 ms per distinct frame).
 *
 * The answer is dwfl_module_addrinfo's, exactly: the index answers only
 * where its rules give one symbol without depending on table order, and
 * says "ask libdwfl" otherwise.  Those rules (elfutils' __libdwfl_addrsym):
 * sized global symbols containing the address first, then sized locals
 * (unless a global sizeless symbol sits exactly at the address); among
 * symbols of the same start and size the best binding, then the first in
 * the table; a sizeless symbol only when no sized one contains the address
 * and it starts at or above every sized symbol's end below the address
 * (an absolute one, such as a version name, only at the address itself).
 * Here: exactly one group of same start and size contains the address in
 * the pass that decides -> that group's symbol; no sized symbol contains it
 * and no sizeless one lies between the last sized end and it -> no name;
 * anything else -> libdwfl.
 */
#define _GNU_SOURCE
#include <elfutils/libdwfl.h>
#include <gelf.h>
#include <stdlib.h>

#include "symidx.h"

const char pf_symidx_none_ = 0;

typedef struct sym {
  uint64_t start, size, end_max; /* end_max: the largest end among this and those before */
  uint32_t idx;
  uint8_t bind;                  /* higher is better: global 3, weak 2, local 1 */
  const char *name;
} sym;

typedef struct pass {
  sym *v;
  size_t n;
} pass;

struct pf_symidx {
  pass global, local; /* sized symbols of each search pass, by address */
  uint64_t *sizeless, *sizeless_global, *sizeless_abs;
  size_t nsizeless, nsizeless_global, nsizeless_abs;
};

static int bind_value(const GElf_Sym *s) {
  switch (GELF_ST_BIND(s->st_info)) {
  case STB_GLOBAL: return 3;
  case STB_WEAK: return 2;
  case STB_LOCAL: return 1;
  default: return 0;
  }
}

static int sym_cmp(const void *a, const void *b) {
  const sym *x = a, *y = b;
  if (x->start != y->start) return x->start < y->start ? -1 : 1;
  if (x->size != y->size) return x->size < y->size ? -1 : 1;
  return x->idx < y->idx ? -1 : x->idx > y->idx;
}

static int u64_cmp(const void *a, const void *b) {
  uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return x < y ? -1 : x > y;
}

static void pass_sort(pass *p) {
  qsort(p->v, p->n, sizeof *p->v, sym_cmp);
  uint64_t m = 0;
  for (size_t i = 0; i < p->n; i++) {
    if (p->v[i].start + p->v[i].size > m) m = p->v[i].start + p->v[i].size;
    p->v[i].end_max = m;
  }
}

void pf_symidx_free(pf_symidx *x) {
  if (!x || x == PF_SYMIDX_NONE) return;
  free(x->global.v);
  free(x->local.v);
  free(x->sizeless);
  free(x->sizeless_global);
  free(x->sizeless_abs);
  free(x);
}

/* Files one symbol; 0, or -1 when the module needs libdwfl's own search
 * (a value that is not the adjusted st_value: function descriptors;
 * absolute symbols, such as version names, keep theirs). */
static int add(pf_symidx *x, Dwfl_Module *m, int i, int first_global) {
  GElf_Sym s;
  GElf_Addr value, bias = 0;
  GElf_Word shndx;
  Elf *elf = NULL;
  const char *name = dwfl_module_getsym_info(m, i, &s, &value, &shndx, &elf, &bias);
  if (!name || !*name || s.st_shndx == SHN_UNDEF) return 0;
  int type = GELF_ST_TYPE(s.st_info);
  if (type == STT_SECTION || type == STT_FILE || type == STT_TLS) return 0;
  if (shndx < SHN_LORESERVE && value != s.st_value + bias) return -1;
  int global = first_global <= 1 || i >= first_global;
  if (!s.st_size) { /* an absolute one (a version name) only ever names its own value */
    if (shndx >= SHN_LORESERVE) x->sizeless_abs[x->nsizeless_abs++] = value;
    else x->sizeless[x->nsizeless++] = value;
    if (global) x->sizeless_global[x->nsizeless_global++] = value;
    return 0;
  }
  pass *p = global ? &x->global : &x->local;
  p->v[p->n++] = (sym){value, s.st_size, 0, (uint32_t)i, (uint8_t)bind_value(&s), name};
  return 0;
}

pf_symidx *pf_symidx_build(Dwfl_Module *m) {
  int n = dwfl_module_getsymtab(m), first_global = dwfl_module_getsymtab_first_global(m);
  if (n <= 0 || first_global < 0) return PF_SYMIDX_NONE;
  pf_symidx *x = calloc(1, sizeof *x);
  if (!x) return PF_SYMIDX_NONE;
  x->global.v = malloc((size_t)n * sizeof(sym));
  x->local.v = malloc((size_t)n * sizeof(sym));
  x->sizeless = malloc((size_t)n * sizeof(uint64_t));
  x->sizeless_global = malloc((size_t)n * sizeof(uint64_t));
  x->sizeless_abs = malloc((size_t)n * sizeof(uint64_t));
  int ok = x->global.v && x->local.v && x->sizeless && x->sizeless_global && x->sizeless_abs;
  for (int i = 1; ok && i < n; i++) ok = add(x, m, i, first_global) == 0;
  if (!ok) {
    pf_symidx_free(x);
    return PF_SYMIDX_NONE;
  }
  pass_sort(&x->global);
  pass_sort(&x->local);
  qsort(x->sizeless, x->nsizeless, sizeof *x->sizeless, u64_cmp);
  qsort(x->sizeless_global, x->nsizeless_global, sizeof *x->sizeless_global, u64_cmp);
  qsort(x->sizeless_abs, x->nsizeless_abs, sizeof *x->sizeless_abs, u64_cmp);
  return x;
}

/* How many values of v[0..n) are <= pc. */
static size_t upto_u64(const uint64_t *v, size_t n, uint64_t pc) {
  size_t lo = 0, hi = n;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (v[mid] <= pc) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

static size_t upto_sym(const pass *p, uint64_t pc) {
  size_t lo = 0, hi = p->n;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (p->v[mid].start <= pc) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

enum { NONE, ONE, MANY };

/* Which sized symbols of pass p contain pc: NONE, ONE group of the same
 * start and size (*best: its best binding, first in the table), or MANY.
 * *end_max: the largest end of p's symbols starting at or below pc. */
static int contain(const pass *p, uint64_t pc, const sym **best, uint64_t *end_max) {
  size_t k = upto_sym(p, pc);
  *end_max = k ? p->v[k - 1].end_max : 0;
  if (!k || *end_max <= pc) return NONE;
  const sym *last = &p->v[k - 1];
  if (pc - last->start >= last->size) return MANY; /* an earlier, wider one holds pc */
  size_t j = k - 1;
  while (j > 0 && p->v[j - 1].start == last->start && p->v[j - 1].size == last->size) j--;
  if (j > 0 && p->v[j - 1].end_max > pc) return MANY;
  *best = &p->v[j];
  for (size_t i = j + 1; i < k; i++)
    if (p->v[i].bind > (*best)->bind) *best = &p->v[i];
  return ONE;
}

int pf_symidx_lookup(const pf_symidx *x, uint64_t pc, const char **name) {
  if (x == PF_SYMIDX_NONE) return -1;
  const sym *s = NULL;
  uint64_t gend, lend;
  int g = contain(&x->global, pc, &s, &gend);
  if (g == MANY) return -1;
  if (g == NONE) {
    size_t k = upto_u64(x->sizeless_global, x->nsizeless_global, pc);
    if (k && x->sizeless_global[k - 1] == pc) return -1;
    int l = contain(&x->local, pc, &s, &lend);
    if (l == MANY) return -1;
    if (l == NONE) { /* a sizeless symbol at or above every sized end? */
      uint64_t floor = gend > lend ? gend : lend;
      k = upto_u64(x->sizeless, x->nsizeless, pc);
      if (k && x->sizeless[k - 1] >= floor) return -1;
      k = upto_u64(x->sizeless_abs, x->nsizeless_abs, pc);
      if (k && x->sizeless_abs[k - 1] == pc) return -1;
      *name = NULL;
      return 0;
    }
  }
  *name = s->name;
  return 1;
}
