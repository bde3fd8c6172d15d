/*
 * symidx.h - a module's symbols by address (symidx.c): the name
 * dwfl_module_addrinfo gives, found by binary search.
 */
#ifndef LOOM_PERF_SYMIDX_H
#define LOOM_PERF_SYMIDX_H

#include <elfutils/libdwfl.h>
#include <stdint.h>

typedef struct pf_symidx pf_symidx;

/* What a module without a usable index holds: every lookup asks libdwfl. */
#define PF_SYMIDX_NONE ((pf_symidx *)&pf_symidx_none_)
extern const char pf_symidx_none_;

/* The index of m's symbol table, or PF_SYMIDX_NONE (no table, out of
 * memory, or values libdwfl adjusts); free with pf_symidx_free. */
pf_symidx *pf_symidx_build(Dwfl_Module *m);
void pf_symidx_free(pf_symidx *x);

/* The symbol dwfl_module_addrinfo(m, pc) names: 1 with *name set, 0 when it
 * names none, -1 when only libdwfl's own search can tell. */
int pf_symidx_lookup(const pf_symidx *x, uint64_t pc, const char **name);

#endif
