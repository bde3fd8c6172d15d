/*
 * hostrec_int.h - the host recorder's state shared by its files: hostrec.c
 * (the recording calls and the threads' buffers), hostrec_copy.c (copies of
 * the buffers while recording, for ring mode's dumps) and hostrec_names.c
 * (names given with loom_thread_name).  The recording calls read only what
 * hostrec.c defines.
 */
#ifndef LOOM_HOSTREC_INT_H
#define LOOM_HOSTREC_INT_H

#include <pthread.h>

#include "record.h"

extern atomic_uint loom__hr_epoch;        /* session number */
extern atomic_int loom__hr_dump_active;   /* a copy is under way: nothing is recycled */
extern pthread_mutex_t loom__hr_list_mu;  /* guards the list of buffers */
extern loom__tbuf *loom__hr_threads;      /* every thread's buffer, newest first */

/* In a child forked without exec: the names' lock may have been held. */
void loom__thread_names_forked(void);

#endif
