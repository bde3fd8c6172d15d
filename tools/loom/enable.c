/*
 * enable.c - backend discovery and the program's environment.
 *
 * `loom record` loads every plug-in it finds into its own process, reads
 * each registered backend's enable description (loom_backend_info.enable)
 * and applies it to the program it runs: environment settings, preloads,
 * LOOM_PLUGINS, and the default device list.  The runtimes' own knowledge
 * (which variable a runtime reads, which driver to look for) lives in the
 * backends' folders; this file names none.
 */
#define _GNU_SOURCE
#include "enable.h"

#include <dirent.h>
#include <libgen.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int tool_libdir(char *out, size_t n) {
  const char *env = getenv("LOOM_LIBEXEC");
  if (env && *env) {
    snprintf(out, n, "%s", env);
    return 0;
  }
  char exe[PATH_MAX - 64];
  ssize_t k = readlink("/proc/self/exe", exe, sizeof exe - 1);
  if (k <= 0) return -1;
  exe[k] = 0;
  char *dir = dirname(exe);
  const char *cands[] = {"%s/plugins", "%s/../lib/loom", "%s/../lib64/loom",
                         "%s/../lib/x86_64-linux-gnu/loom"};
  for (size_t i = 0; i < sizeof cands / sizeof cands[0]; i++) {
    char p[PATH_MAX + 64], probe[PATH_MAX + 128];
    snprintf(p, sizeof p, cands[i], dir);
    snprintf(probe, sizeof probe, "%s/loom-preload.so", p);
    if (access(probe, R_OK) == 0) {
      char *real = realpath(p, NULL);
      const char *use = real ? real : p;
      int fits = strlen(use) < n;
      if (fits) memcpy(out, use, strlen(use) + 1);
      free(real);
      return fits ? 0 : -1;
    }
  }
  return -1;
}

/* ---- discovery ------------------------------------------------------------ */
static char *real_or_copy(const char *p) {
  char *r = realpath(p, NULL);
  return r ? r : strdup(p);
}

static size_t set_find(const plugin_set *ps, const char *real) {
  size_t i = 0;
  while (i < ps->n && strcmp(ps->paths[i], real)) i++;
  return i;
}

/* named: the user named it (LOOM_PLUGINS, LOOM_PLUGIN_PATH, --plugin). */
static void set_add(plugin_set *ps, const char *path, int named) {
  char *real = real_or_copy(path);
  size_t at = real ? set_find(ps, real) : ps->n;
  if (!real || at < ps->n) {
    if (real && named) ps->named[at] = 1;
    free(real);
    return;
  }
  if (ps->n == ps->cap) {
    size_t cap = ps->cap ? 2 * ps->cap : 16;
    char **v = realloc(ps->paths, cap * sizeof *v);
    if (v) ps->paths = v;
    unsigned char *u = v ? realloc(ps->named, cap) : NULL;
    if (!u) {
      free(real);
      return;
    }
    ps->named = u, ps->cap = cap;
  }
  ps->named[ps->n] = (unsigned char)named;
  ps->paths[ps->n++] = real;
}

static int cmp_str(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

static void append(char **list, const char *item) {
  size_t old = *list ? strlen(*list) : 0, add = strlen(item);
  char *v = realloc(*list, old + add + 2);
  if (!v) return;
  if (old) v[old++] = ':';
  memcpy(v + old, item, add + 1);
  *list = v;
}

/* The registry's convention: libloom-*.so, in name order. */
static void add_folder(plugin_set *ps, const char *dir, int user) {
  DIR *d = opendir(dir);
  if (!d) {
    /* Left to the program's registry, which says so in the trace. */
    if (user) append(&ps->bad_folders, dir);
    return;
  }
  char **names = NULL;
  size_t n = 0, cap = 0;
  for (struct dirent *e; (e = readdir(d)) != NULL;) {
    size_t len = strlen(e->d_name);
    if (len <= 11 || strncmp(e->d_name, "libloom-", 8) || strcmp(e->d_name + len - 3, ".so"))
      continue;
    if (n == cap) {
      char **v = realloc(names, (cap = cap ? 2 * cap : 16) * sizeof *v);
      if (!v) break;
      names = v;
    }
    size_t l = strlen(dir) + len + 2;
    if ((names[n] = malloc(l)) != NULL) snprintf(names[n++], l, "%s/%s", dir, e->d_name);
  }
  closedir(d);
  if (n) qsort(names, n, sizeof *names, cmp_str);
  for (size_t i = 0; i < n; i++) {
    set_add(ps, names[i], user);
    free(names[i]);
  }
  free(names);
}

static void add_list(plugin_set *ps, const char *list, int folders) {
  char *copy = list ? strdup(list) : NULL, *save = NULL;
  for (char *p = copy ? strtok_r(copy, ":", &save) : NULL; p; p = strtok_r(NULL, ":", &save))
    if (*p) folders ? add_folder(ps, p, 1) : set_add(ps, p, 1);
  free(copy);
}

int plugins_discover(plugin_set *ps, const char *libdir, char *const *extra,
                     size_t nextra, const char *who) {
  /* The program's session reports plug-ins that fail to load; here they
   * would only be said twice.  (The level is read at loom's first message,
   * a registration below, so the user's setting is back for the program.) */
  char *old_log = getenv("LOOM_LOG") ? strdup(getenv("LOOM_LOG")) : NULL;
  setenv("LOOM_LOG", "quiet", 1);
  loom_init(); /* loads LOOM_PLUGINS and LOOM_PLUGIN_PATH itself */
  size_t first = ps->n;
  if (libdir) add_folder(ps, libdir, 0);
  size_t ninstalled = ps->n;
  add_list(ps, getenv("LOOM_PLUGIN_PATH"), 1);
  add_list(ps, getenv("LOOM_PLUGINS"), 0);
  for (size_t i = first; i < ninstalled; i++) loom_plugin_load(ps->paths[i]);
  int rc = 0;
  for (size_t i = 0; i < nextra; i++) {
    if (access(extra[i], R_OK) != 0) {
      fprintf(stderr, "%s: --plugin %s: no such file\n", who, extra[i]);
      rc = -1;
      continue;
    }
    set_add(ps, extra[i], 1);
    if (loom_plugin_load(extra[i]) != LOOM_OK) {
      fprintf(stderr, "%s: --plugin %s: %s\n", who, extra[i], loom_last_error());
      rc = -1;
    }
  }
  if (old_log) setenv("LOOM_LOG", old_log, 1);
  else unsetenv("LOOM_LOG");
  free(old_log);
  return rc;
}

void plugins_free(plugin_set *ps) {
  for (size_t i = 0; i < ps->n; i++) free(ps->paths[i]);
  free(ps->paths);
  free(ps->named);
  free(ps->bad_folders);
  memset(ps, 0, sizeof *ps);
}

/* ---- the program's environment -------------------------------------------- */
char *enable_subst(const char *value, const char *self) {
  char *dirbuf = strdup(self ? self : "");
  const char *dir = dirbuf ? dirname(dirbuf) : ".";
  size_t cap = strlen(value) + 1, len = 0;
  for (const char *p = value; *p; p++) cap += strlen(self ? self : "") + strlen(dir);
  char *out = malloc(cap);
  for (const char *p = value; out && *p;) {
    const char *rep = NULL;
    if (!strncmp(p, "$SELF", 5)) rep = self ? self : "", p += 5;
    else if (!strncmp(p, "$DIR", 4)) rep = dir, p += 4;
    if (rep) len += (size_t)sprintf(out + len, "%s", rep);
    else out[len++] = *p++;
  }
  if (out) out[len] = 0;
  free(dirbuf);
  return out;
}

/* A growing ':'-separated list. */
typedef struct strlist {
  char *s;
  size_t len;
} strlist;

static void list_add(strlist *l, const char *item) {
  size_t add = strlen(item) + 1;
  char *v = realloc(l->s, l->len + add + 1);
  if (!v) return;
  l->s = v;
  l->len += (size_t)sprintf(l->s + l->len, "%s%s", l->len ? ":" : "", item);
}

static void prepend_env(const char *name, const char *value) {
  const char *old = getenv(name);
  if (!old || !*old) {
    setenv(name, value, 1);
    return;
  }
  size_t n = strlen(old) + strlen(value) + 2;
  char *v = malloc(n);
  if (!v) return;
  snprintf(v, n, "%s:%s", value, old);
  setenv(name, v, 1);
  free(v);
}

static void devices_add(char *devices, size_t n, const char *type) {
  size_t tl = strlen(type);
  for (const char *p = devices; *p;) {
    const char *e = strchr(p, ',');
    size_t l = e ? (size_t)(e - p) : strlen(p);
    if (l == tl && !strncmp(p, type, l)) return;
    p += l + (e != NULL);
  }
  size_t len = strlen(devices);
  if (len + tl + 2 <= n) snprintf(devices + len, n - len, "%s%s", len ? "," : "", type);
}

/* 1 when the list "a,b,c" holds type, or "all". */
static int devices_has(const char *devices, const char *type) {
  size_t tl = strlen(type);
  for (const char *p = devices; p && *p;) {
    const char *e = strchr(p, ',');
    size_t l = e ? (size_t)(e - p) : strlen(p);
    if ((l == tl && !strncmp(p, type, l)) || (l == 3 && !strncmp(p, "all", 3))) return 1;
    p += l + (e != NULL);
  }
  return 0;
}

typedef struct enable_ctx {
  const char *asked; /* the devices the user named, NULL: the default ones */
  const char *also;  /* types recorded beside them (loom record --memory host) */
  const plugin_set *ps;
  char **skip;  /* per plug-in: 1 = not through LOOM_PLUGINS */
  char *used;   /* per plug-in: HAS_BACKEND, RECORDED (mark_recorded) */
  strlist preload;
  char *devices;
  size_t ndevices;
  const loom_backend_enable *done[64]; /* applied once, even if shared by tables */
  size_t ndone;
  int rc;
} enable_ctx;

/* The enable description's fields that fit in its declared size. */
static const loom_backend_enable *enable_of(const loom_backend_info *b, loom_backend_enable *copy) {
  if (b->struct_size < offsetof(loom_backend_info, enable) + sizeof b->enable || !b->enable)
    return NULL;
  memset(copy, 0, sizeof *copy);
  size_t n = b->enable->struct_size < sizeof *copy ? b->enable->struct_size : sizeof *copy;
  memcpy(copy, b->enable, n);
  return copy;
}

static size_t plugin_index(const plugin_set *ps, const char *origin) {
  char *real = real_or_copy(origin);
  size_t i = real ? set_find(ps, real) : ps->n;
  free(real);
  return i;
}

/* file: "" for the plug-in itself, else absolute or relative to its folder. */
static void apply_preload(enable_ctx *c, const loom_backend_info *b, const char *file) {
  char *path = NULL;
  if (!*file || file[0] == '/') {
    path = strdup(*file ? file : b->origin);
  } else {
    char *dir = enable_subst("$DIR/", b->origin);
    path = dir ? malloc(strlen(dir) + strlen(file) + 1) : NULL;
    if (path) sprintf(path, "%s%s", dir, file);
    free(dir);
  }
  if (!path) return;
  if (access(path, R_OK) != 0)
    fprintf(stderr, "loom record: backend '%s' asks to preload %s, which is not there; "
                    "not preloaded\n", b->name, path);
  else
    list_add(&c->preload, path);
  free(path);
}

static void apply_one(const loom_backend_info *b, void *user) {
  enable_ctx *c = user;
  loom_backend_enable e;
  const loom_backend_enable *en = enable_of(b, &e);
  size_t k = plugin_index(c->ps, b->origin);
  if (!en) return;
  if ((en->flags & LOOM_ENABLE_F_NO_PLUGIN_LOAD) && k < c->ps->n) (*c->skip)[k] = 1;
  if ((en->flags & LOOM_ENABLE_F_DEFAULT) && (!en->default_check || en->default_check()))
    devices_add(c->devices, c->ndevices, b->device_type);
  for (size_t i = 0; i < c->ndone; i++)
    if (c->done[i] == b->enable) return;
  if (c->ndone < sizeof c->done / sizeof c->done[0]) c->done[c->ndone++] = b->enable;
  for (uint32_t i = 0; en->env && i < en->nenv; i++) {
    const loom_env_setting *s = &en->env[i];
    if (!s->name || !*s->name || strchr(s->name, '=') || !s->value ||
        s->how > LOOM_ENV_PREPEND_PATH) {
      fprintf(stderr, "loom record: backend '%s': environment setting %u is malformed "
                      "(no name, no value or unknown how); ignored (loom check-backend %s "
                      "says more)\n", b->name, (unsigned)i, b->origin);
      continue;
    }
    char *v = enable_subst(s->value, b->origin);
    if (!v) continue;
    if (s->how == LOOM_ENV_PREPEND_PATH) prepend_env(s->name, v);
    else setenv(s->name, v, s->how == LOOM_ENV_OVERRIDE);
    free(v);
  }
  if ((en->flags & LOOM_ENABLE_F_PRELOAD_SELF) ||
      ((en->flags & LOOM_ENABLE_F_PRELOAD_WHEN_ASKED) &&
       (devices_has(c->asked ? c->asked : c->devices, b->device_type) ||
        devices_has(c->also, b->device_type))))
    apply_preload(c, b, "");
  for (const char *const *p = en->preload; p && *p; p++)
    if (**p) apply_preload(c, b, *p);
}

/* Marks the plug-ins with a backend of a device type the program records
 * (RECORDED) and those with a backend at all (HAS_BACKEND). */
enum { HAS_BACKEND = 1, RECORDED = 2 };
static void mark_recorded(const loom_backend_info *b, void *user) {
  enable_ctx *c = user;
  size_t k = plugin_index(c->ps, b->origin);
  if (k >= c->ps->n) return;
  c->used[k] |= HAS_BACKEND;
  if (devices_has(c->asked ? c->asked : c->devices, b->device_type) ||
      devices_has(c->also, b->device_type))
    c->used[k] |= RECORDED;
}

int plugins_enable(const plugin_set *ps, const char *preload_first, const char *asked,
                   const char *also, char *devices, size_t n) {
  char *skip = calloc(ps->n + 1, 1), *used = calloc(ps->n + 1, 1);
  if (!skip || !used) {
    free(skip);
    free(used);
    return -1;
  }
  snprintf(devices, n, "cpu");
  enable_ctx c = {.asked = asked, .also = also, .ps = ps, .skip = &skip, .used = used,
                  .devices = devices, .ndevices = n};
  loom_backends_list(apply_one, &c);
  loom_backends_list(mark_recorded, &c);
  /* The plug-ins go to the program by name: every one the user named, and
   * of loom's own those of the device types recorded (another would only
   * cost the program its loading, ~0.1-1 ms each) or that registered nothing
   * here (for the program's session to say why).  Folders are resolved
   * here, so a file that asks not to be loaded is not found there again
   * (only folders that cannot be opened stay, for the program to report). */
  strlist plugins = {0};
  for (size_t i = 0; i < ps->n; i++)
    if (!skip[i] && (ps->named[i] || used[i] & RECORDED || !(used[i] & HAS_BACKEND)))
      list_add(&plugins, ps->paths[i]);
  if (plugins.s) setenv("LOOM_PLUGINS", plugins.s, 1);
  else unsetenv("LOOM_PLUGINS");
  if (ps->bad_folders) setenv("LOOM_PLUGIN_PATH", ps->bad_folders, 1);
  else unsetenv("LOOM_PLUGIN_PATH");
  list_add(&c.preload, preload_first);
  if (c.preload.s) prepend_env("LD_PRELOAD", c.preload.s);
  free(plugins.s);
  free(c.preload.s);
  free(skip);
  free(used);
  return c.rc;
}

/* ---- loom backends -------------------------------------------------------- */
static const char *how_name(uint32_t how) {
  switch (how) {
  case LOOM_ENV_SET_IF_UNSET: return "unless already set";
  case LOOM_ENV_OVERRIDE: return "always";
  case LOOM_ENV_PREPEND_PATH: return "prepended";
  default: return "unknown way, ignored";
  }
}

void enable_describe(FILE *f, const loom_backend_info *b) {
  int has_flags = b->struct_size >= offsetof(loom_backend_info, flags) + sizeof b->flags;
  fprintf(f, "    lazy: %s\n", has_flags && (b->flags & LOOM_BACKEND_F_LAZY)
                                   ? "yes (loads its runtime only when a session asks)" : "no");
  loom_backend_enable e;
  const loom_backend_enable *en = enable_of(b, &e);
  if (!en) {
    fprintf(f, "    loom record: loads it through LOOM_PLUGINS; records it when --devices "
               "names %s\n", b->device_type);
    return;
  }
  if (en->flags & LOOM_ENABLE_F_DEFAULT) {
    if (en->default_check)
      fprintf(f, "    loom record: records %s by default where its runtime is installed "
                 "(here: %s)\n", b->device_type, en->default_check() ? "yes" : "no");
    else
      fprintf(f, "    loom record: records %s by default\n", b->device_type);
  } else {
    fprintf(f, "    loom record: records %s when --devices names it\n", b->device_type);
  }
  for (uint32_t i = 0; en->env && i < en->nenv; i++) {
    char *v = en->env[i].value ? enable_subst(en->env[i].value, b->origin) : NULL;
    fprintf(f, "      sets %s=%s (%s)\n", en->env[i].name ? en->env[i].name : "(no name)",
            v ? v : "(no value)", how_name(en->env[i].how));
    free(v);
  }
  if (en->flags & LOOM_ENABLE_F_PRELOAD_SELF) fprintf(f, "      preloads %s\n", b->origin);
  if (en->flags & LOOM_ENABLE_F_PRELOAD_WHEN_ASKED)
    fprintf(f, "      preloads %s only when %s is recorded\n", b->origin, b->device_type);
  for (const char *const *p = en->preload; p && *p; p++) fprintf(f, "      preloads %s\n", *p);
  fprintf(f, "      %s\n", en->flags & LOOM_ENABLE_F_NO_PLUGIN_LOAD
                               ? "not loaded through LOOM_PLUGINS (only its runtime loads it)"
                               : "loads it through LOOM_PLUGINS");
}
