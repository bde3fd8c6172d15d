/*
 * heap.h - what the two files of libloom-heap.so share: interpose.c (the
 * program's malloc, calloc, realloc, free, posix_memalign, aligned_alloc,
 * memalign, valloc and pvalloc, forwarded to the next definition in the
 * process) and backend.c (the backend "heap" that turns them into memory
 * records while a session records it).
 */
#ifndef LOOM_HEAP_H
#define LOOM_HEAP_H

#define _GNU_SOURCE
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#define HEAP_EXPORT __attribute__((visibility("default")))

/* The calls, as the records name them. */
enum heap_call {
  HC_MALLOC, HC_CALLOC, HC_REALLOC, HC_FREE, HC_POSIX_MEMALIGN, HC_ALIGNED_ALLOC,
  HC_MEMALIGN, HC_VALLOC, HC_PVALLOC, HC_COUNT_
};

/* The wrappers' state: 0 before the next definitions are found, HEAP_OFF
 * (found; the wrappers only forward: one load and one branch), HEAP_ON
 * (found, and a session records the heap). */
enum { HEAP_UNRESOLVED = 0, HEAP_OFF = 1, HEAP_ON = 2 };
extern atomic_int heap_mode;

/* 1 when malloc in this process is interpose.c's (the library was
 * preloaded), else 0. */
int heap_interposed(void);

/* Turns recording on or off (backend.c calls it at start and stop); the
 * next definitions are found first when they were not yet. */
void heap_set_recording(int on);

/* Records an allocation of n bytes at p, or a free of p (alloc 0), made by
 * `call` whose caller's return address is ra, at time t (heap_now(), or 0
 * for now; the host recorder, when it records, reads its own clock).  A
 * free is noted before the memory goes back.  Nothing for the calls loom itself makes:
 * those on a thread
 * already inside a record (the core's own allocations while it takes one)
 * and those whose caller is in loom's own libraries. */
void heap_note(int alloc, int call, const void *p, size_t n, uint64_t t, const void *ra);
/* The time memory records carry: the host recorder's clock. */
uint64_t heap_now(void);

#endif
