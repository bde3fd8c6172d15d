/*
 * kept.c - the kept folder of a run whose trace could not be written (see
 * kept.h): its manifest written by `loom record` (follow.c), read by `loom
 * salvage` (salvage.c), and where this user's kept folders are found.
 */
#define _GNU_SOURCE
#include "kept.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* s without tabs and newlines (the manifest's separators) */
static void flat(char *s) {
  for (; *s; s++)
    if (*s == '\t' || *s == '\n') *s = ' ';
}

int kept_add(kept *k, int pid, int arena, const char *path, const char *cmd, const char *how) {
  if (k->n == k->cap) {
    size_t cap = k->cap ? k->cap * 2 : 8;
    kept_item *v = realloc(k->v, cap * sizeof *v);
    if (!v) return -1;
    k->v = v;
    k->cap = cap;
  }
  kept_item *it = &k->v[k->n++];
  it->pid = pid;
  it->arena = arena;
  snprintf(it->path, sizeof it->path, "%s", path);
  snprintf(it->cmd, sizeof it->cmd, "%s", cmd ? cmd : "");
  snprintf(it->how, sizeof it->how, "%s", how ? how : "");
  flat(it->cmd);
  flat(it->how);
  return 0;
}

void kept_free(kept *k) {
  free(k->v);
  k->v = NULL;
  k->n = k->cap = 0;
}

/* The manifest's text into at/kept (through a temporary name). */
static int write_manifest(const kept *k, const char *at, char *err, size_t nerr) {
  char path[PATH_MAX + 16], tmp[PATH_MAX + 32];
  snprintf(path, sizeof path, "%s/" KEPT_MANIFEST, at);
  snprintf(tmp, sizeof tmp, "%s.tmp", path);
  FILE *f = fopen(tmp, "w");
  if (!f) {
    snprintf(err, nerr, "cannot write %s: %s", tmp, strerror(errno));
    return -1;
  }
  size_t al = strlen(at);
  fprintf(f, "loom-kept 1\nout\t%s\ntodir\t%d\nsession\t%s\n", k->out, k->to_dir, k->session);
  for (size_t i = 0; i < k->n; i++) {
    const kept_item *it = &k->v[i];
    const char *p = it->path; /* inside the folder: by name (the folder is renamed) */
    if (!strncmp(p, at, al) && p[al] == '/') p += al + 1;
    fprintf(f, "%s\t%d\t%s\t%s\t%s\n", it->arena ? "arena" : "trace", it->pid, p, it->cmd,
            it->how);
  }
  if (fclose(f) != 0 || rename(tmp, path) != 0) {
    snprintf(err, nerr, "cannot write %s: %s", path, strerror(errno));
    unlink(tmp);
    return -1;
  }
  return 0;
}

int kept_save(kept *k, const char *at, char *err, size_t nerr) {
  snprintf(k->dir, sizeof k->dir, "%s", at);
  if (write_manifest(k, at, err, nerr) != 0) return -1;
  /* loom-arenas-<pid>-XXXXXX or loom-record-<pid>-XXXXXX: loom-kept-<pid>-XXXXXX */
  const char *base = strrchr(at, '/');
  base = base ? base + 1 : at;
  const char *tail = strchr(base + (strncmp(base, "loom-", 5) ? 0 : 5), '-');
  char to[PATH_MAX + 64];
  snprintf(to, sizeof to, "%.*s" KEPT_PREFIX "%s", (int)(base - at), at, tail ? tail + 1 : base);
  if (strlen(to) < sizeof k->dir && rename(at, to) == 0) snprintf(k->dir, sizeof k->dir, "%s", to);
  return 0;
}

static void field(char **p, char *out, size_t n) {
  size_t l = strcspn(*p, "\t\n");
  snprintf(out, n, "%.*s", (int)l, *p);
  *p += l;
  if (**p == '\t') (*p)++;
}

/* Every <pid>.arena in dir, when there is no manifest. */
static int scan_arenas(kept *k, const char *dir, char *err, size_t nerr) {
  DIR *d = opendir(dir);
  if (!d) {
    snprintf(err, nerr, "cannot read %s: %s", dir, strerror(errno));
    return -1;
  }
  struct dirent *e;
  while ((e = readdir(d))) {
    char *end;
    long pid = strtol(e->d_name, &end, 10);
    if (end != e->d_name && !strcmp(end, ".arena") &&
        kept_add(k, (int)pid, 1, e->d_name, "", NULL)) {
      closedir(d);
      snprintf(err, nerr, "out of memory");
      return -1;
    }
  }
  closedir(d);
  return 0;
}

int kept_load(kept *k, const char *dir, char *err, size_t nerr) {
  memset(k, 0, sizeof *k);
  snprintf(k->dir, sizeof k->dir, "%s", dir);
  struct stat st;
  if (stat(dir, &st) != 0) {
    snprintf(err, nerr, "%s: %s", dir, strerror(errno));
    return -1;
  }
  if (!S_ISDIR(st.st_mode)) {
    snprintf(err, nerr, "%s is not a folder", dir);
    return -1;
  }
  char path[PATH_MAX + 16], line[PATH_MAX * 2 + 600];
  snprintf(path, sizeof path, "%s/" KEPT_MANIFEST, dir);
  FILE *f = fopen(path, "r");
  if (!f) return scan_arenas(k, dir, err, nerr);
  if (!fgets(line, sizeof line, f) || strcmp(line, "loom-kept 1\n")) {
    fclose(f);
    snprintf(err, nerr, "%s is not a manifest of loom's (or of another version)", path);
    return -1;
  }
  while (fgets(line, sizeof line, f)) {
    char *p = line, key[16], a[PATH_MAX], b[PATH_MAX], c[512], h[512];
    field(&p, key, sizeof key);
    field(&p, a, sizeof a);
    if (!strcmp(key, "out")) snprintf(k->out, sizeof k->out, "%s", a);
    else if (!strcmp(key, "todir")) k->to_dir = atoi(a);
    else if (!strcmp(key, "session")) snprintf(k->session, sizeof k->session, "%s", a);
    else if (!strcmp(key, "arena") || !strcmp(key, "trace")) {
      field(&p, b, sizeof b);
      field(&p, c, sizeof c);
      field(&p, h, sizeof h);
      char full[PATH_MAX * 2 + 2];
      if (key[0] == 't' && b[0] != '/') { /* a trace inside the kept folder */
        snprintf(full, sizeof full, "%s/%s", dir, b);
        snprintf(b, sizeof b, "%.*s", (int)(sizeof b - 1), full);
      }
      if (kept_add(k, atoi(a), key[0] == 'a', b, c, h)) {
        fclose(f);
        snprintf(err, nerr, "out of memory");
        return -1;
      }
    }
  }
  fclose(f);
  return 0;
}

/* The newest loom-kept-* folder of this user in base. */
static void newest_in(const char *base, char *best, size_t n, time_t *when, size_t *count) {
  DIR *d = opendir(base);
  struct dirent *e;
  while (d && (e = readdir(d))) {
    if (strncmp(e->d_name, KEPT_PREFIX, strlen(KEPT_PREFIX))) continue;
    char p[PATH_MAX + 300];
    struct stat st;
    snprintf(p, sizeof p, "%s/%s", base, e->d_name);
    if (lstat(p, &st) != 0 || !S_ISDIR(st.st_mode) || st.st_uid != getuid()) continue;
    (*count)++;
    if (*best && st.st_mtime < *when) continue;
    *when = st.st_mtime;
    snprintf(best, n, "%s", p);
  }
  if (d) closedir(d);
}

int kept_find(char *dir, size_t n, size_t *others) {
  const char *shm = getenv("LOOM_SHM_DIR"), *tmp = getenv("TMPDIR");
  const char *bases[] = {shm && *shm ? shm : "/dev/shm", tmp && *tmp ? tmp : "/tmp"};
  time_t when = 0;
  size_t count = 0;
  dir[0] = 0;
  for (size_t i = 0; i < 2; i++)
    if (i == 0 || strcmp(bases[0], bases[1])) newest_in(bases[i], dir, n, &when, &count);
  *others = count ? count - 1 : 0;
  return dir[0] ? 0 : -1;
}

void kept_quote(char *out, size_t n, const char *s) {
  if (!s[strspn(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789/._-+=:,@%")]) {
    snprintf(out, n, "%s", s);
    return;
  }
  size_t l = 0;
  if (n < 3) return;
  out[l++] = '\'';
  for (; *s && l + 5 < n; s++) {
    if (*s == '\'') {
      memcpy(out + l, "'\\''", 4);
      l += 4;
    } else {
      out[l++] = *s;
    }
  }
  out[l++] = '\'';
  out[l] = 0;
}
