/*
 * fds.c - the descriptors libloom-perf.so keeps inside the program: one
 * perf_event file per event and a pipe that wakes the reader at stop.
 *
 * A program may close every descriptor it inherited or did not open itself
 * (daemons do; Python's os.closerange), and its next files then get these
 * numbers.  So before any use that could touch such a file (poll, ioctl,
 * write, close) the backend checks the number still is its own: a perf
 * event whose id is the one the kernel gave at open (every perf_event file
 * shares one anonymous inode, so the inode alone cannot tell two apart; the
 * id ioctl is perf's own, answered ENOTTY by any other file), or the pipe's
 * inode.  A number that is no longer the backend's is left alone.
 *
 * libdw holds descriptors too: each ELF file and separate debug file it
 * reads, closed by dwfl_end.  The backend opens or sees each one (held
 * below) and lets dwfl_end close them only while every one is still the
 * file it was; otherwise libdw's state is left as it is (its memory not
 * given back) and the backend closes those still its own.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <linux/perf_event.h>
#include <pthread.h>
#include <stdlib.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "perf.h"

int pf_fd_same(int fd, uint64_t dev, uint64_t ino) {
  struct stat s;
  return fd >= 0 && fstat(fd, &s) == 0 && (uint64_t)s.st_dev == dev && (uint64_t)s.st_ino == ino;
}

int pf_fd_inode(int fd, uint64_t *dev, uint64_t *ino) {
  struct stat s;
  if (fstat(fd, &s) != 0) return -1;
  *dev = (uint64_t)s.st_dev;
  *ino = (uint64_t)s.st_ino;
  return 0;
}

int pf_fd_is_event(int fd, uint64_t dev, uint64_t ino, uint64_t id) {
  uint64_t got = 0;
  return pf_fd_same(fd, dev, ino) && ioctl(fd, PERF_EVENT_IOC_ID, &got) == 0 && got == id;
}

int pf_wake_open(pf_wake *w) {
  int p[2];
  w->rd = w->wr = -1;
  if (pipe2(p, O_CLOEXEC | O_NONBLOCK) != 0) return -1;
  if (pf_fd_inode(p[0], &w->dev, &w->ino)) {
    close(p[0]);
    close(p[1]);
    return -1;
  }
  w->rd = p[0];
  w->wr = p[1];
  return 0;
}

int pf_wake_ours(const pf_wake *w, int fd) { return pf_fd_same(fd, w->dev, w->ino); }

void pf_wake_ring(const pf_wake *w) {
  char c = 1;
  if (pf_wake_ours(w, w->wr)) (void)!write(w->wr, &c, 1);
}

void pf_wake_close(pf_wake *w) {
  if (pf_wake_ours(w, w->rd)) close(w->rd);
  if (pf_wake_ours(w, w->wr)) close(w->wr);
  w->rd = w->wr = -1;
}

/* ---- descriptors handed to libdw -------------------------------------------- */
typedef struct held_fd {
  int fd;
  uint64_t dev, ino;
} held_fd;

static pthread_mutex_t held_mu = PTHREAD_MUTEX_INITIALIZER;
static held_fd *held;
static size_t nheld, cap_held;
static int held_lost; /* one could not be noted: none is known to be intact */

void pf_held_add(int fd) {
  held_fd h = {fd, 0, 0};
  (void)fcntl(fd, F_SETFD, FD_CLOEXEC);
  pthread_mutex_lock(&held_mu);
  if (pf_fd_inode(fd, &h.dev, &h.ino) || pf_grow((void **)&held, &cap_held, nheld + 1, sizeof h))
    held_lost = 1;
  else
    held[nheld++] = h;
  pthread_mutex_unlock(&held_mu);
}

void pf_held_forget(int fd) {
  pthread_mutex_lock(&held_mu);
  for (size_t i = nheld; i-- > 0;)
    if (held[i].fd == fd) {
      held[i] = held[--nheld];
      break;
    }
  pthread_mutex_unlock(&held_mu);
}

int pf_held_intact(void) {
  pthread_mutex_lock(&held_mu);
  int ok = !held_lost;
  for (size_t i = 0; ok && i < nheld; i++) ok = pf_fd_same(held[i].fd, held[i].dev, held[i].ino);
  pthread_mutex_unlock(&held_mu);
  return ok;
}

void pf_held_release(int close_ours) {
  pthread_mutex_lock(&held_mu);
  for (size_t i = 0; close_ours && i < nheld; i++)
    if (pf_fd_same(held[i].fd, held[i].dev, held[i].ino)) close(held[i].fd);
  free(held);
  held = NULL;
  nheld = cap_held = 0;
  held_lost = 0;
  pthread_mutex_unlock(&held_mu);
}
