/*
 * spin.h - a lock for a backend's short critical sections on a runtime
 * call's path (a table lookup and update, tens of ns): one atomic exchange
 * to take it and a release store to give it back, where a pthread mutex in
 * a multi-threaded process costs two atomic operations and two calls into
 * libc (measured on this project's VM: 7 ns a pair against 15-17 ns).  A
 * waiter spins a little, then yields its CPU, so that a holder preempted in
 * its section is waited for, not spun on.  Never hold it across a call into
 * the runtime or into loom.
 */
#ifndef LOOM_BACKEND_SPIN_H
#define LOOM_BACKEND_SPIN_H

#include <sched.h>
#include <stdatomic.h>

typedef struct loom_spin {
  atomic_flag held;
} loom_spin;

#define LOOM_SPIN_INIT {ATOMIC_FLAG_INIT}

static inline void loom_spin_lock(loom_spin *s) {
  for (unsigned n = 0; atomic_flag_test_and_set_explicit(&s->held, memory_order_acquire); n++) {
    if (n >= 64) {
      sched_yield();
      continue;
    }
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
  }
}

static inline void loom_spin_unlock(loom_spin *s) {
  atomic_flag_clear_explicit(&s->held, memory_order_release);
}

#endif
