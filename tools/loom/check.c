/*
 * check.c - `loom check-backend [--expect-records] PLUGIN.so`: checks one
 * plug-in the way loom uses it and prints what its vendor needs to fix,
 * one line per problem ("error: ..."; "note: ..." lines do not fail).
 *
 * It loads the file, runs its entry point with a host table that forwards
 * to loom's own but watches what the plug-in does (which tables it
 * registers, which devices, resources and clocks it declares, what it
 * emits), checks each table field by field, then probes it and runs a short
 * idle session with its device types.  Exit status 1 on any error.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <libgen.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "enable.h"
#include "spec.h"

enum { MAX_TABLES = 16, MAX_IDS = 256, MAX_EMIT_ERRORS = 5 };

static struct {
  const loom_host *real;
  loom_host wrap;
  pthread_mutex_t mu;
  const loom_backend_ops *tables[MAX_TABLES];
  loom_status reg_status[MAX_TABLES];
  char reg_error[MAX_TABLES][256];
  size_t ntables;
  uint32_t devices[MAX_IDS], resources[MAX_IDS], res_device[MAX_IDS];
  loom_clock clocks[MAX_IDS];
  size_t ndevices, nresources, nclocks;
  uint64_t emitted;
  char emit_errors[MAX_EMIT_ERRORS][256];
  size_t nemit_errors;
  uint64_t more_emit_errors;
} w = {.mu = PTHREAD_MUTEX_INITIALIZER};

static int errors;

static void error(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  printf("error: ");
  vprintf(fmt, ap);
  printf("\n");
  va_end(ap);
  errors++;
}

static void note(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  printf("note: ");
  vprintf(fmt, ap);
  printf("\n");
  va_end(ap);
}

/* ---- the watching host ------------------------------------------------------ */
static loom_status wrap_register(const loom_backend_ops *ops, const char *origin) {
  loom_status st = w.real->backend_register(ops, origin);
  pthread_mutex_lock(&w.mu);
  size_t i = 0;
  while (i < w.ntables && w.tables[i] != ops) i++;
  if (i == w.ntables && i < MAX_TABLES) {
    w.tables[i] = ops;
    w.reg_status[i] = st;
    snprintf(w.reg_error[i], sizeof w.reg_error[i], "%s", st ? loom_last_error() : "");
    w.ntables++;
  }
  pthread_mutex_unlock(&w.mu);
  return st;
}

static int has_id(const uint32_t *v, size_t n, uint32_t id) {
  for (size_t i = 0; i < n; i++)
    if (v[i] == id) return 1;
  return 0;
}

static loom_status wrap_clock_declare(loom_backend *b, loom_clock_domain d, const char *name,
                                      loom_clock *out) {
  loom_status st = w.real->clock_declare(b, d, name, out);
  pthread_mutex_lock(&w.mu);
  if (st == LOOM_OK && out && w.nclocks < MAX_IDS) w.clocks[w.nclocks++] = *out;
  pthread_mutex_unlock(&w.mu);
  return st;
}

static loom_status wrap_device_add(loom_backend *b, const loom_device_info *info, uint32_t *out) {
  loom_status st = w.real->device_add(b, info, out);
  pthread_mutex_lock(&w.mu);
  if (st == LOOM_OK && out && w.ndevices < MAX_IDS) w.devices[w.ndevices++] = *out;
  pthread_mutex_unlock(&w.mu);
  return st;
}

static loom_status wrap_resource_add(loom_backend *b, uint32_t device, const char *name,
                                     uint64_t native, uint32_t *out) {
  loom_status st = w.real->resource_add(b, device, name, native, out);
  pthread_mutex_lock(&w.mu);
  if (st == LOOM_OK && out && w.nresources < MAX_IDS) {
    w.res_device[w.nresources] = device;
    w.resources[w.nresources++] = *out;
  }
  pthread_mutex_unlock(&w.mu);
  return st;
}

static void emit_problem(const char *fmt, ...) {
  if (w.nemit_errors == MAX_EMIT_ERRORS) {
    w.more_emit_errors++;
    return;
  }
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(w.emit_errors[w.nemit_errors], sizeof w.emit_errors[0], fmt, ap);
  va_end(ap);
  for (size_t i = 0; i < w.nemit_errors; i++)
    if (!strcmp(w.emit_errors[i], w.emit_errors[w.nemit_errors])) return;
  w.nemit_errors++;
}

static int resource_ok(uint32_t device, uint32_t res) {
  for (size_t i = 0; i < w.nresources; i++)
    if (w.resources[i] == res && w.res_device[i] == device) return 1;
  return 0;
}

static loom_status wrap_emit(loom_backend *b, const loom_record *r) {
  pthread_mutex_lock(&w.mu);
  w.emitted++;
  if (!r || r->struct_size < offsetof(loom_record, category)) {
    emit_problem("emitted a record with struct_size %u (set it to sizeof(loom_record))",
                 r ? (unsigned)r->struct_size : 0);
  } else {
    const char *k = r->kind < LOOM_KIND_COUNT_ ? loom_kind_name((loom_kind)r->kind) : "?";
    if (r->kind >= LOOM_KIND_COUNT_)
      emit_problem("emitted a record of unknown kind %u", (unsigned)r->kind);
    else if (r->device != LOOM_DEVICE_HOST && !has_id(w.devices, w.ndevices, r->device))
      emit_problem("emitted a %s record on device index %u, which device_add never returned",
                   k, (unsigned)r->device);
    else if (r->device != LOOM_DEVICE_HOST && !resource_ok(r->device, r->resource))
      emit_problem("emitted a %s record on resource %u of device %u, which resource_add "
                   "never returned for that device", k, (unsigned)r->resource, (unsigned)r->device);
    if (!has_id(w.clocks, w.nclocks, r->clock))
      emit_problem("emitted a %s record in clock %u, which clock_declare never returned", k,
                   (unsigned)r->clock);
    if (r->end < r->start)
      emit_problem("emitted a %s record that ends before it starts", k);
  }
  pthread_mutex_unlock(&w.mu);
  loom_status st = w.real->emit(b, r);
  if (st != LOOM_OK && st != LOOM_ESTATE) {
    pthread_mutex_lock(&w.mu);
    emit_problem("emit refused a record: %s", loom_strerror(st));
    pthread_mutex_unlock(&w.mu);
  }
  return st;
}

static void wrap_host(void) {
  size_t n = w.real->struct_size < sizeof w.wrap ? w.real->struct_size : sizeof w.wrap;
  memcpy(&w.wrap, w.real, n);
  w.wrap.backend_register = wrap_register;
  w.wrap.clock_declare = wrap_clock_declare;
  w.wrap.device_add = wrap_device_add;
  w.wrap.resource_add = wrap_resource_add;
  w.wrap.emit = wrap_emit;
}

/* ---- the table -------------------------------------------------------------- */
#define HAS(ops, f) ((ops)->struct_size >= offsetof(loom_backend_ops, f) + sizeof((ops)->f))
#define OPS_MIN (cli_tools()->backend_ops_min_size) /* what this libloom accepts */
#define ENABLE_MIN (offsetof(loom_backend_enable, default_check) + sizeof(void (*)(void)))

static void check_enable(const loom_backend_enable *e, const char *path) {
  if (e->struct_size < ENABLE_MIN) {
    error("enable: struct_size is %u, smaller than loom_backend_enable (%zu bytes): set "
          "struct_size = sizeof(loom_backend_enable)", (unsigned)e->struct_size, ENABLE_MIN);
    return;
  }
  uint32_t known =
      LOOM_ENABLE_F_DEFAULT | LOOM_ENABLE_F_PRELOAD_SELF | LOOM_ENABLE_F_NO_PLUGIN_LOAD |
      LOOM_ENABLE_F_PRELOAD_WHEN_ASKED;
  if (e->flags & ~known) error("enable: unknown flags 0x%x", (unsigned)(e->flags & ~known));
  if (e->nenv && !e->env) error("enable: nenv is %u but env is NULL", (unsigned)e->nenv);
  for (uint32_t i = 0; e->env && i < e->nenv; i++) {
    const loom_env_setting *s = &e->env[i];
    if (!s->name || !*s->name || strchr(s->name, '='))
      error("enable: env[%u] has %s", (unsigned)i,
            s->name && *s->name ? "a name with '='" : "no name");
    else if (!s->value) error("enable: env[%u] (%s) has no value", (unsigned)i, s->name);
    if (s->how > LOOM_ENV_PREPEND_PATH)
      error("enable: env[%u] has unknown how %u (LOOM_ENV_SET_IF_UNSET, LOOM_ENV_OVERRIDE or "
            "LOOM_ENV_PREPEND_PATH)", (unsigned)i, (unsigned)s->how);
  }
  int loads = (e->flags & (LOOM_ENABLE_F_PRELOAD_SELF | LOOM_ENABLE_F_PRELOAD_WHEN_ASKED)) ||
              e->nenv;
  for (const char *const *p = e->preload; p && *p; p++) {
    char *dir = enable_subst("$DIR", path);
    char full[4096];
    snprintf(full, sizeof full, "%s%s%s", (*p)[0] == '/' ? "" : dir, (*p)[0] == '/' ? "" : "/", *p);
    free(dir);
    if (access(full, R_OK) != 0) error("enable: preload %s: not found (a relative name is "
                                       "taken from the plug-in's folder)", full);
    loads = 1;
  }
  if ((e->flags & LOOM_ENABLE_F_DEFAULT) && e->default_check)
    note("enable: default_check says the runtime is %sinstalled here",
         e->default_check() ? "" : "not ");
  if ((e->flags & LOOM_ENABLE_F_NO_PLUGIN_LOAD) && !loads)
    error("enable: LOOM_ENABLE_F_NO_PLUGIN_LOAD but no env setting or preload that would load it: "
          "the backend would never register in the program");
}

/* ABI 1.3: each declared option is "<name>.KEY" with a line of help. */
static void check_options(const loom_backend_ops *o) {
  const loom_option_desc *d = HAS(o, options) ? o->options : NULL;
  if (!d) {
    note("table: no options declared: any '%s.KEY' option is passed to it unchecked",
         o->name ? o->name : "?");
    return;
  }
  size_t nl = o->name ? strlen(o->name) : 0;
  for (unsigned i = 0; d[i].key; i++) {
    if (!nl || strncmp(d[i].key, o->name, nl) || d[i].key[nl] != '.' || !d[i].key[nl + 1])
      error("table: option %u (%s) does not start with '%s.'", i, d[i].key,
            o->name ? o->name : "?");
    if (!d[i].help || !*d[i].help) error("table: option %s has no help line", d[i].key);
  }
}

static void check_table(const loom_backend_ops *o, const char *path) {
  if (o->struct_size < OPS_MIN) {
    error("table: struct_size is %u, smaller than the %zu bytes (up to pop_external) of the "
          "oldest table loom accepts (ABI 1.0): set struct_size = sizeof(loom_backend_ops)",
          (unsigned)o->struct_size, (size_t)OPS_MIN);
    return;
  }
  if (o->struct_size > sizeof *o)
    note("table: %u bytes, newer than this loom's %zu: fields past them are ignored",
         (unsigned)o->struct_size, sizeof *o);
  if (o->abi_major != LOOM_ABI_MAJOR)
    error("table: built for loom ABI %u.%u, this loom speaks ABI %d.%d: rebuild against this "
          "loom's headers (abi_major = LOOM_ABI_MAJOR)", (unsigned)o->abi_major,
          (unsigned)o->abi_minor, LOOM_ABI_MAJOR, LOOM_ABI_MINOR);
  else if (o->abi_minor > LOOM_ABI_MINOR)
    note("table: ABI %u.%u is newer than this loom's %d.%d: what it appended is ignored",
         (unsigned)o->abi_major, (unsigned)o->abi_minor, LOOM_ABI_MAJOR, LOOM_ABI_MINOR);
  if (o->abi_major == LOOM_ABI_MAJOR && o->abi_minor >= 1 && !HAS(o, enable))
    error("table: says ABI %u.%u but its struct_size (%u) does not reach the 1.1 slot enable: "
          "set struct_size = sizeof(loom_backend_ops)", (unsigned)o->abi_major,
          (unsigned)o->abi_minor, (unsigned)o->struct_size);
  if (!o->name || !*o->name) error("table: no name (a unique backend name)");
  if (!o->device_type || !*o->device_type)
    error("table: no device_type (the device type it serves)");
  if (!o->start) error("table: no start operation (required)");
  if (!o->stop) error("table: no stop operation (required)");
  if (!o->probe) note("table: no probe: loom takes the runtime as usable everywhere");
  if (!o->kinds) error("table: kinds is 0: declare the LOOM_KIND_BIT mask of what it emits");
  else if (o->kinds & ~LOOM_KINDS_ALL)
    error("table: kinds has unknown bits 0x%x", (unsigned)(o->kinds & ~LOOM_KINDS_ALL));
  if (o->flags & ~(uint32_t)LOOM_BACKEND_F_LAZY)
    error("table: unknown flags 0x%x", (unsigned)(o->flags & ~(uint32_t)LOOM_BACKEND_F_LAZY));
  if (HAS(o, pop_external) && !o->push_external != !o->pop_external)
    error("table: push_external and pop_external come in pairs (one is NULL)");
  check_options(o);
  const loom_backend_enable *e = HAS(o, enable) ? o->enable : NULL;
  if (e) check_enable(e, path);
  else note("no enable description: loom record loads it through LOOM_PLUGINS and records "
            "'%s' only when --devices names it", o->device_type ? o->device_type : "?");
}

/* ---- the session ------------------------------------------------------------ */
static void run_session(const char *devices, int expect_records) {
  loom_session_config cfg = {.struct_size = sizeof cfg, .devices = devices,
                             .name = "loom check-backend"};
  loom_session *s = NULL;
  if (loom_session_create(&cfg, &s) != LOOM_OK) {
    error("session: cannot create a session for '%s': %s", devices, loom_last_error());
    return;
  }
  loom_trace *t = NULL;
  if (loom_session_start(s) != LOOM_OK) error("session: cannot start: %s", loom_last_error());
  else {
    usleep(20000);
    if (loom_session_stop(s, &t) != LOOM_OK) error("session: cannot stop: %s", loom_last_error());
  }
  for (size_t i = 0; i < loom_session_warning_count(s); i++)
    error("session: %s", loom_session_warning(s, i));
  loom_session_destroy(s);
  loom_trace_free(t);
  for (size_t i = 0; i < w.nemit_errors; i++) error("%s", w.emit_errors[i]);
  if (w.more_emit_errors)
    error("and %llu more bad records", (unsigned long long)w.more_emit_errors);
  if (!w.emitted && expect_records)
    error("emitted no records during a session (start to flush)");
  else if (!w.emitted)
    note("emitted no records in an idle session (fine for a backend that records only the "
         "program's calls)");
  else
    note("emitted %llu records in an idle session", (unsigned long long)w.emitted);
}

/* The synopsis (spec.c) on stderr; 2, the status of a wrong command line. */
static int usage(void) {
  cli_usage(stderr, cli_command("check-backend"));
  return 2;
}

int cmd_check_backend(int argc, char **argv) {
  const char *path = NULL;
  int expect = 0;
  for (int i = 2; i < argc; i++) {
    if (!strcmp(argv[i], "--expect-records")) expect = 1;
    else if (argv[i][0] == '-' || path) return usage();
    else path = argv[i];
  }
  if (!path) return usage();
  /* Only this plug-in, and loom's messages as lines of ours. */
  unsetenv("LOOM_PLUGINS");
  unsetenv("LOOM_PLUGIN_PATH");
  setenv("LOOM_LOG", "quiet", 1);
  loom_init();
  printf("checking %s\n", path);
  void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    const char *why = dlerror();
    error("cannot be loaded: %s", why ? why : "dlopen failed");
    return 1;
  }
  loom_plugin_entry_fn entry =
      (loom_plugin_entry_fn)(uintptr_t)dlsym(h, LOOM_PLUGIN_ENTRY_SYMBOL);
  if (!entry) {
    error("does not export %s: a plug-in exports loom_status %s(const loom_host *) with "
          "default visibility", LOOM_PLUGIN_ENTRY_SYMBOL, LOOM_PLUGIN_ENTRY_SYMBOL);
    return 1;
  }
  w.real = loom_host_get(LOOM_ABI_MAJOR);
  wrap_host();
  loom_status st = entry(&w.wrap);
  int refused = 0;
  for (size_t i = 0; i < w.ntables; i++) refused |= w.reg_status[i] != LOOM_OK;
  if (st != LOOM_OK && refused) /* the table's errors below say why */
    note("%s returned %s: loom refused its table", LOOM_PLUGIN_ENTRY_SYMBOL, loom_strerror(st));
  else if (st != LOOM_OK)
    error("%s returned %s", LOOM_PLUGIN_ENTRY_SYMBOL, loom_strerror(st));
  if (!w.ntables) error("%s registered no backend: call host->backend_register(&table, NULL)",
                        LOOM_PLUGIN_ENTRY_SYMBOL);
  char devices[1024] = "";
  for (size_t i = 0; i < w.ntables; i++) {
    const loom_backend_ops *o = w.tables[i];
    int before = errors;
    int named = o->struct_size >= offsetof(loom_backend_ops, device_type) + sizeof o->device_type;
    printf("backend '%s' (device type '%s')\n", named && o->name ? o->name : "?",
           named && o->device_type ? o->device_type : "?");
    check_table(o, path);
    if (w.reg_status[i] != LOOM_OK && errors == before)
      error("loom refused the table: %s", w.reg_error[i]);
    if (w.reg_status[i] == LOOM_OK && o->device_type && !strstr(devices, o->device_type)) {
      size_t l = strlen(devices);
      snprintf(devices + l, sizeof devices - l, "%s%s", l ? "," : "", o->device_type);
    }
  }
  if (*devices) run_session(devices, expect);
  if (errors) printf("%s: %d error%s\n", path, errors, errors == 1 ? "" : "s");
  else printf("%s: ok\n", path);
  return errors ? 1 : 0;
}
