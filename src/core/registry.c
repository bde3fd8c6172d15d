/*
 * registry.c - the list of registered backends and plug-in loading.
 *
 * Registration is valid at any time and from any thread, also before
 * loom_init and while a session records (the backend is offered to that
 * session, which takes it at once if it asked for its device type).  Entries
 * are never removed: a plug-in's code stays loaded until the process exits,
 * so a table pointer stays valid.  Only the registry and the session look at
 * backends; nothing else in the core knows their names.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core.h"
#include "ops_min.h"

static pthread_mutex_t reg_mu = PTHREAD_MUTEX_INITIALIZER;
static loom_backend **reg;
static size_t nreg, cap_reg;
/* Set while the loader runs a plug-in, so registrations name their file. */
static __thread const char *loading_origin;

/* Set by a registration that refused its table while the loader runs a
 * plug-in, so the loader does not warn a second time; tables it accepted. */
static __thread int refused_while_loading, accepted_while_loading;

static char *origin_of(const loom_backend_ops *ops, const char *origin) {
  if (origin) return loom__strdup(origin);
  if (loading_origin) return loom__strdup(loading_origin);
  Dl_info info;
  if (dladdr(ops, &info) && info.dli_fname) {
    void *self = dlsym(RTLD_DEFAULT, LOOM_HOST_GET_SYMBOL);
    Dl_info me;
    if (!(self && dladdr(self, &me) && me.dli_fname &&
          !strcmp(me.dli_fname, info.dli_fname)))
      return loom__strdup(info.dli_fname);
  }
  return loom__strdup("built-in");
}

/* A refusal: the same text is the warning and loom_last_error(). */
static loom_status refuse(loom_status st, char *org, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static loom_status refuse(loom_status st, char *org, const char *fmt, ...) {
  char msg[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  free(org);
  if (loading_origin) refused_while_loading = 1;
  loom__warn_pending("%s", msg);
  return loom__fail(st, "%s", msg);
}

/* What is wrong with a table that is not NULL: LOOM_OK, or the status with
 * the refusal's text in why (where: the table's origin). */
static loom_status check_table(const loom_backend_ops *ops, const char *where, char *why,
                               size_t n) {
  if (ops->abi_major != LOOM_ABI_MAJOR) {
    int named = ops->struct_size >= offsetof(loom_backend_ops, device_type) && ops->name;
    snprintf(why, n,
             "backend '%s' from %s refused: built for loom ABI %u.%u, this loom speaks ABI "
             "%d.%d; rebuild the backend against this loom's headers",
             named ? ops->name : "?", where, (unsigned)ops->abi_major, (unsigned)ops->abi_minor,
             LOOM_ABI_MAJOR, LOOM_ABI_MINOR);
    return LOOM_EABI;
  }
  if (ops->struct_size < LOOM__OPS_MIN_SIZE) {
    snprintf(why, n,
             "backend table from %s refused: its struct_size is %u bytes, but an ops table of "
             "ABI 1.0 needs at least %zu bytes (it claims ABI %u.%u); set struct_size to "
             "sizeof(loom_backend_ops)",
             where, (unsigned)ops->struct_size, (size_t)LOOM__OPS_MIN_SIZE,
             (unsigned)ops->abi_major, (unsigned)ops->abi_minor);
    return LOOM_EABI;
  }
  if (!ops->name || !ops->device_type || !*ops->name || !*ops->device_type ||
      !ops->start || !ops->stop) {
    snprintf(why, n,
             "backend '%s' from %s refused: it needs a name, a device type, start and stop "
             "(it has no %s)",
             ops->name && *ops->name ? ops->name : "?", where,
             !ops->name || !*ops->name ? "name"
             : !ops->device_type || !*ops->device_type ? "device type"
             : !ops->start ? "start" : "stop");
    return LOOM_EINVAL;
  }
  return LOOM_OK;
}

/* A registry entry for ops: the table copied and zero-extended to the
 * core's size, its private state allocated; origin set by the caller.
 * NULL when out of memory. */
static loom_backend *new_entry(const loom_backend_ops *ops) {
  loom_backend *b = calloc(1, sizeof *b);
  if (!b) return NULL;
  size_t n = ops->struct_size < sizeof b->ops ? ops->struct_size : sizeof b->ops;
  memcpy(&b->ops, ops, n);
  b->ops.struct_size = (uint32_t)n;
  b->registered = ops;
  b->st = LOOM_BACKEND_REGISTERED;
  if (n >= offsetof(loom_backend_ops, pop_external) + sizeof(void *) &&
      ops->push_external && ops->pop_external)
    b->hook = (loom__ext_hook){ops->push_external, ops->pop_external, b};
  pthread_mutex_init(&b->mu, NULL);
  if (ops->state_size && !(b->state = calloc(1, ops->state_size))) {
    free(b);
    return NULL;
  }
  return b;
}

/* Adds a checked table to the registry.  *out: the new entry, which takes
 * org; NULL with LOOM_OK when this very table is registered already.
 * LOOM_EINVAL with why when another backend has its name; LOOM_ENOMEM. */
static loom_status add_entry(const loom_backend_ops *ops, char *org, char *why, size_t n,
                             loom_backend **out) {
  *out = NULL;
  pthread_mutex_lock(&reg_mu);
  for (size_t i = 0; i < nreg; i++) {
    if (reg[i]->registered == ops) {
      pthread_mutex_unlock(&reg_mu);
      return LOOM_OK;
    }
    if (!strcmp(reg[i]->ops.name, ops->name)) {
      snprintf(why, n, "backend '%s' from %s refused: a backend of that name is already "
               "registered from %s", ops->name, org ? org : "?",
               reg[i]->origin ? reg[i]->origin : "?");
      pthread_mutex_unlock(&reg_mu);
      return LOOM_EINVAL;
    }
  }
  loom_backend *b = org ? new_entry(ops) : NULL;
  if (b && LOOM__PUSH(reg, nreg, cap_reg, b) != 0) {
    free(b->state);
    free(b);
    b = NULL;
  }
  if (b) {
    b->origin = org;
    b->index = nreg - 1;
  }
  pthread_mutex_unlock(&reg_mu);
  *out = b;
  return b ? LOOM_OK : LOOM_ENOMEM;
}

loom_status loom__backend_register(const loom_backend_ops *ops,
                                   const char *origin) {
  if (!ops)
    return refuse(LOOM_EINVAL, NULL, "backend registration from %s refused: its table is NULL",
                  origin ? origin : loading_origin ? loading_origin
                                                   : "a caller of backend_register");
  char *org = origin_of(ops, origin);
  char why[1024];
  loom_backend *b = NULL;
  loom_status st = check_table(ops, org ? org : "?", why, sizeof why);
  if (st == LOOM_OK) st = add_entry(ops, org, why, sizeof why, &b);
  if (st == LOOM_ENOMEM) {
    free(org);
    loom__warn_pending("backend '%s': out of memory while registering", ops->name);
    return loom__fail(LOOM_ENOMEM, "out of memory");
  }
  if (st != LOOM_OK) return refuse(st, org, "%s", why); /* frees org */
  if (!b) { /* this table was registered before */
    free(org);
    return LOOM_OK;
  }
  if (loading_origin) accepted_while_loading++;
  loom__log(LOOM_SEV_INFO, "registered backend '%s' (%s) from %s", b->ops.name,
            b->ops.device_type, b->origin);
  loom__session_offer(b); /* joins a session recording now, if it asked */
  return LOOM_OK;
}

loom_backend **loom__registry_snapshot(size_t *n) {
  pthread_mutex_lock(&reg_mu);
  loom_backend **copy = malloc((nreg ? nreg : 1) * sizeof *copy);
  *n = copy ? nreg : 0;
  if (copy && nreg) memcpy(copy, reg, nreg * sizeof *copy);
  pthread_mutex_unlock(&reg_mu);
  return copy;
}

size_t loom_backends_list(loom_backend_visit_fn fn, void *user) {
  loom__ensure_init();
  size_t n;
  loom_backend **all = loom__registry_snapshot(&n);
  for (size_t i = 0; fn && i < n; i++) {
    loom_backend *b = all[i];
    loom_backend_info info;
    memset(&info, 0, sizeof info);
    info.struct_size = sizeof info;
    pthread_mutex_lock(&b->mu);
    char reason[sizeof b->reason];
    memcpy(reason, b->reason, sizeof reason);
    info.state = b->st;
    pthread_mutex_unlock(&b->mu);
    info.name = b->ops.name;
    info.device_type = b->ops.device_type;
    info.origin = b->origin;
    info.kinds = b->ops.kinds;
    info.reason = reason;
    info.flags = b->ops.flags;
    /* b->ops is zeroed past the table's own size: NULL for ABI 1.0. */
    info.enable = b->ops.enable;
    info.options = b->ops.options; /* NULL before ABI 1.3 */
    fn(&info, user);
  }
  free(all);
  return n;
}

/* Whether key ("NAME.KEY") is an option its backend declares: 1 when no
 * backend NAME is registered (a plug-in may come later) or it declares
 * none (before ABI 1.3); else 0 or 1, with the keys it declares in known. */
int loom__backend_option_known(const char *key, char *known, size_t cap) {
  const char *dot = strchr(key, '.');
  if (!dot) return 1;
  size_t n, l = 0;
  int ok = 1;
  loom_backend **all = loom__registry_snapshot(&n);
  if (cap) known[0] = 0;
  for (size_t i = 0; i < n; i++) {
    const loom_backend_ops *o = &all[i]->ops;
    size_t nl = (size_t)(dot - key);
    if (!o->options || !o->name || strlen(o->name) != nl || strncmp(o->name, key, nl)) continue;
    ok = 0;
    for (const loom_option_desc *d = o->options; d->key; d++) {
      if (!strcmp(d->key, key)) ok = 1;
      if (l < cap) l += (size_t)snprintf(known + l, cap - l, "%s%s", l ? ", " : "", d->key);
    }
    if (ok) break;
    if (cap && !known[0]) snprintf(known, cap, "no options");
  }
  free(all);
  return ok;
}

/* ---- plug-ins ------------------------------------------------------------ */
/* Each file is loaded once: dlopen gives the same handle for a file reached
 * again (LOOM_PLUGINS and a LOOM_PLUGIN_PATH folder, another spelling of
 * its path), and its entry point is not run again: the first load's status
 * and message stand, said once. */
typedef struct loaded {
  void *h;
  loom_status st;
  int done; /* 0 while its entry point runs (a load from another thread: OK) */
  char *msg;
} loaded;
static pthread_mutex_t load_mu = PTHREAD_MUTEX_INITIALIZER;
static loaded *loads;
static size_t nloads, cap_loads;

/* 1 with *st set when h was loaded before; else 0, h noted as loading
 * (or -1 when out of memory: loaded anyway). */
static int seen_before(void *h, loom_status *st) {
  pthread_mutex_lock(&load_mu);
  for (size_t i = 0; i < nloads; i++) {
    if (loads[i].h != h) continue;
    *st = loads[i].done ? loads[i].st : LOOM_OK;
    if (*st != LOOM_OK) loom__fail(*st, "%s", loads[i].msg ? loads[i].msg : "");
    pthread_mutex_unlock(&load_mu);
    return 1;
  }
  loaded l = {h, LOOM_OK, 0, NULL};
  int rc = LOOM__PUSH(loads, nloads, cap_loads, l) ? -1 : 0;
  pthread_mutex_unlock(&load_mu);
  return rc;
}

static void note_loaded(void *h, loom_status st) {
  pthread_mutex_lock(&load_mu);
  for (size_t i = 0; i < nloads; i++) {
    if (loads[i].h != h) continue;
    loads[i].st = st;
    loads[i].done = 1;
    if (st != LOOM_OK) loads[i].msg = loom__strdup(loom_last_error());
  }
  pthread_mutex_unlock(&load_mu);
}

/* The entry point ran and returned st: what the warning and error say. */
static loom_status entry_failed(const char *path, loom_status st, int accepted) {
  char more[64] = "and registered no backend";
  if (accepted)
    snprintf(more, sizeof more, "after registering %d backend%s", accepted,
             accepted == 1 ? "" : "s");
  loom__warn_pending("plug-in %s failed to initialise: its %s returned status %d (%s) %s", path,
                     LOOM_PLUGIN_ENTRY_SYMBOL, (int)st, loom_strerror(st), more);
  return loom__fail(st, "plug-in %s failed to initialise: its %s returned status %d (%s) %s", path,
                    LOOM_PLUGIN_ENTRY_SYMBOL, (int)st, loom_strerror(st), more);
}

loom_status loom__plugin_load(const char *path) {
  void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    const char *why = dlerror();
    loom__warn_pending("cannot load plug-in %s: %s", path, why ? why : "unknown error");
    return loom__fail(LOOM_ENOTFOUND, "cannot load plug-in %s: %s", path,
                      why ? why : "unknown error");
  }
  loom_status st;
  if (seen_before(h, &st) == 1) {
    dlclose(h); /* the first load keeps it */
    return st;
  }
  loom_plugin_entry_fn entry =
      (loom_plugin_entry_fn)(uintptr_t)dlsym(h, LOOM_PLUGIN_ENTRY_SYMBOL);
  if (!entry) {
    loom__warn_pending("%s is not a loom plug-in: it does not export %s", path,
                       LOOM_PLUGIN_ENTRY_SYMBOL);
    st = loom__fail(LOOM_EFORMAT, "%s is not a loom plug-in: it does not export %s", path,
                    LOOM_PLUGIN_ENTRY_SYMBOL);
    note_loaded(h, st);
    return st;
  }
  const char *prev = loading_origin;
  int prev_refused = refused_while_loading, prev_accepted = accepted_while_loading;
  loading_origin = path;
  refused_while_loading = accepted_while_loading = 0;
  st = entry(loom__host());
  int refused = refused_while_loading, accepted = accepted_while_loading;
  loading_origin = prev;
  refused_while_loading = prev_refused;
  accepted_while_loading = prev_accepted;
  /* A refusal was already warned about, with its reason (the last error). */
  if (st != LOOM_OK && !refused) st = entry_failed(path, st, accepted);
  note_loaded(h, st);
  return st;
}

static int cmp_str(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

static void scan_dir(const char *dir) {
  DIR *d = opendir(dir);
  if (!d) {
    loom__warn_pending("LOOM_PLUGIN_PATH: cannot open folder %s", dir);
    return;
  }
  char **names = NULL;
  size_t n = 0, cap = 0;
  struct dirent *e;
  while ((e = readdir(d)) != NULL) {
    size_t len = strlen(e->d_name);
    if (len > 11 && !strncmp(e->d_name, "libloom-", 8) &&
        !strcmp(e->d_name + len - 3, ".so")) {
      char *p = loom__asprintf("%s/%s", dir, e->d_name);
      if (p && LOOM__PUSH(names, n, cap, p) != 0) free(p);
    }
  }
  closedir(d);
  if (n) qsort(names, n, sizeof *names, cmp_str);
  for (size_t i = 0; i < n; i++) {
    loom__plugin_load(names[i]);
    free(names[i]);
  }
  free(names);
}

static void for_each_item(const char *list, void (*fn)(const char *)) {
  if (!list) return;
  char *copy = loom__strdup(list), *save = NULL;
  for (char *p = copy ? strtok_r(copy, ":", &save) : NULL; p;
       p = strtok_r(NULL, ":", &save))
    if (*p) fn(p);
  free(copy);
}

static void load_one(const char *path) { loom__plugin_load(path); }

void loom__plugins_from_env(void) {
  for_each_item(getenv("LOOM_PLUGINS"), load_one);
  for_each_item(getenv("LOOM_PLUGIN_PATH"), scan_dir);
}

static pthread_once_t init_once = PTHREAD_ONCE_INIT;

void loom__register_builtins(void); /* generated: builtins.c */

static void do_init(void) {
  loom__register_builtins();
  loom__plugins_from_env();
}

void loom__ensure_init(void) { pthread_once(&init_once, do_init); }

loom_status loom_plugin_load(const char *path) {
  loom__ensure_init();
  if (!path || !*path) return loom__fail(LOOM_EINVAL, "no plug-in path");
  return loom__plugin_load(path);
}

loom_status loom_init(void) {
  loom__ensure_init();
  return LOOM_OK;
}
