/*
 * preload_id.c - the identity of a process under `loom record`: its command
 * line, program name and rank (from the launcher's environment: RANK and
 * WORLD_SIZE from torchrun, OMPI_COMM_WORLD_RANK/SIZE from Open MPI,
 * PMI_RANK/SIZE from MPICH and Slurm), written into its trace as metadata
 * and used to name its files.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "preload_id.h"

void loom__rec_cmdline(char *out, size_t n) {
  out[0] = 0;
  int fd = open("/proc/self/cmdline", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return;
  ssize_t k = read(fd, out, n - 1);
  close(fd);
  if (k <= 0) {
    out[0] = 0;
    return;
  }
  while (k > 0 && out[k - 1] == 0) k--; /* the last argument's terminator */
  for (ssize_t i = 0; i < k; i++)
    if (out[i] == 0) out[i] = ' ';
  out[k] = 0;
}

static const char *env_first(const char *const *names) {
  for (; *names; names++) {
    const char *v = getenv(*names);
    if (v && *v) return v;
  }
  return NULL;
}

static const char *rank_env(void) {
  static const char *const n[] = {"RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK", NULL};
  return env_first(n);
}

static const char *size_env(void) {
  static const char *const n[] = {"WORLD_SIZE", "OMPI_COMM_WORLD_SIZE", "PMI_SIZE", NULL};
  return env_first(n);
}

int loom__rec_file(char *out, size_t n, const char *suffix) {
  const char *dir = getenv("LOOM_RECORD_DIR");
  const char *arenas = getenv("LOOM_RECORD_ARENAS");
  if (!strcmp(suffix, ".arena") && arenas && *arenas) dir = arenas;
  if (!dir || !*dir) return -1;
  int k = snprintf(out, n, "%s/%d%s", dir, (int)getpid(), suffix);
  return k > 0 && (size_t)k < n ? 0 : -1;
}

/* The program: argv[0]'s last component, with characters a file name should
 * not hold replaced. */
static void program(char *out, size_t n) {
  char cmd[4096];
  loom__rec_cmdline(cmd, sizeof cmd);
  char *sp = strchr(cmd, ' ');
  if (sp) *sp = 0;
  const char *b = strrchr(cmd, '/');
  b = b ? b + 1 : cmd;
  snprintf(out, n, "%.*s", (int)(n - 1), *b ? b : "process");
  for (char *p = out; *p; p++)
    if (*p == '/' || *p == ' ' || (unsigned char)*p < 32) *p = '_';
}

const char *loom__rec_trace_path(char *out, size_t n) {
  const char *dir = getenv("LOOM_RECORD_TRACEDIR"), *top = getenv("LOOM_RECORD_PID");
  /* -o FILE: the first program writes FILE itself (seen there at once with
   * --duration; kept there if the others cannot be merged into it). */
  int top_direct = getenv("LOOM_RECORD_TOP_OUTPUT") && top && atol(top) == (long)getpid();
  if (!dir || !*dir || top_direct) {
    const char *o = getenv("LOOM_RECORD_OUTPUT");
    return o && *o ? o : "loom-trace.json";
  }
  const char *ext = getenv("LOOM_RECORD_EXT");
  const char *rank = rank_env();
  char prog[256];
  program(prog, sizeof prog);
  char rk[64] = "";
  if (rank && strlen(rank) < 32 && !strchr(rank, '/')) snprintf(rk, sizeof rk, "-rank%s", rank);
  snprintf(out, n, "%s/%s-%d%s%s", dir, prog, (int)getpid(), rk, ext && *ext ? ext : ".json");
  return out;
}

void loom__rec_mark_started(void) {
  char path[4096], cmd[4096];
  if (loom__rec_file(path, sizeof path, ".started") != 0) return;
  loom__rec_cmdline(cmd, sizeof cmd);
  FILE *f = fopen(path, "w");
  if (!f) return;
  fprintf(f, "%s\n", cmd);
  fclose(f);
}

/* Appends ",key=value" with value percent-encoded (',' ';' '%' and control
 * characters: the option syntax's own); -1 when it does not fit. */
static int put(char *out, size_t n, const char *key, const char *value) {
  size_t l = strlen(out);
  int k = snprintf(out + l, n - l, "%s%s=", l ? "," : "", key);
  if (k < 0 || (size_t)k >= n - l) return -1;
  l += (size_t)k;
  for (const unsigned char *v = (const unsigned char *)value; *v; v++) {
    int esc = *v == ',' || *v == ';' || *v == '%' || *v < 32;
    if (l + (esc ? 3 : 1) >= n) return -1;
    if (esc) l += (size_t)snprintf(out + l, n - l, "%%%02X", *v);
    else out[l++] = (char)*v;
  }
  out[l] = 0;
  return 0;
}

int loom__rec_options(char *out, size_t n, const char *user) {
  if (snprintf(out, n, "%s", user ? user : "") >= (int)n) return -1;
  char cmd[2048], host[256] = "", pid[32], name[2200];
  loom__rec_cmdline(cmd, sizeof cmd);
  gethostname(host, sizeof host - 1);
  snprintf(pid, sizeof pid, "%d", (int)getpid());
  const char *rank = rank_env(), *size = size_env();
  if (rank) snprintf(name, sizeof name, "rank %s: %s", rank, cmd);
  else snprintf(name, sizeof name, "%s", cmd);
  if (put(out, n, "meta.pid", pid) || put(out, n, "meta.command_line", cmd) ||
      put(out, n, "meta.hostname", host) || put(out, n, "process_name", name))
    return -1;
  if (rank && put(out, n, "meta.rank", rank)) return -1;
  if (size && put(out, n, "meta.world_size", size)) return -1;
  return 0;
}

/* For the control socket's `loom trigger --list` answer. */
const char *loom__rec_rank(void) { return rank_env(); }
void loom__rec_program(char *out, size_t n) { program(out, n); }
