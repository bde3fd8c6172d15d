/*
 * _module.c - the _loom module: errors, plug-in loading in the running
 * interpreter (what `loom record` arranges with LD_PRELOAD and LOOM_PLUGINS,
 * done here in-process), backends(), and the framework adapter attached on
 * demand (torch_ops).
 *
 * Plug-ins: the folder next to libloom (build tree: plugins/, installed:
 * lib/loom/) is scanned for libloom-*.so, each loaded with loom_plugin_load
 * unless already registered, and each backend's enable description applied
 * the way `loom record` applies it to a program: its environment settings
 * ($SELF, $DIR) are set in this process, so a runtime that reads them when
 * it initialises (a layer list, say) sees them if the program imports loom
 * before it first uses that runtime.  A backend that must be preloaded
 * cannot be enabled in-process; loom.backends() says so.  In a process that
 * `loom record` runs (its preload is mapped) nothing is loaded: the preload
 * did it.
 */
#define _GNU_SOURCE
#include "_loom.h"

#include <dirent.h>
#include <dlfcn.h>
#include <libgen.h>
#include <limits.h>
#include <link.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "loom/plugin.h"

PyObject *lpy_error;
static char plugin_dir[PATH_MAX];
static char lib_path[PATH_MAX];

const char *lpy_plugin_dir(void) { return plugin_dir; }

static const char *status_name(loom_status st) {
  static const char *const n[] = {"OK", "EINVAL", "ENOMEM", "ESTATE", "EABI", "ENOTFOUND",
                                  "EIO", "EBACKEND", "EUNSUPPORTED", "EBUSY", "EFORMAT"};
  return (unsigned)st < sizeof n / sizeof n[0] ? n[st] : "E?";
}

PyObject *lpy_raise_msg(loom_status st, const char *msg) {
  PyObject *e = PyObject_CallFunction(lpy_error, "s", msg && *msg ? msg : loom_strerror(st));
  if (!e) return NULL;
  PyObject *code = PyLong_FromLong((long)st);
  if (code) PyObject_SetAttrString(e, "status", code);
  Py_XDECREF(code);
  PyObject *name = PyUnicode_FromString(status_name(st));
  if (name) PyObject_SetAttrString(e, "status_name", name);
  Py_XDECREF(name);
  PyErr_SetObject(lpy_error, e);
  Py_DECREF(e);
  return NULL;
}

PyObject *lpy_raise(loom_status st) { return lpy_raise_msg(st, loom_last_error()); }

/* ---- the plug-in folder ------------------------------------------------------ */
static void find_dirs(void) {
  Dl_info di;
  if (!dladdr((void *)loom_version, &di) || !di.dli_fname) return;
  char *real = realpath(di.dli_fname, NULL);
  snprintf(lib_path, sizeof lib_path, "%s", real ? real : di.dli_fname);
  free(real);
  char dir[PATH_MAX];
  snprintf(dir, sizeof dir, "%s", lib_path);
  char *d = dirname(dir);
  const char *cands[] = {"%s/plugins", "%s/loom"};
  for (size_t i = 0; i < 2; i++) {
    char p[PATH_MAX + 16], probe[PATH_MAX + 64];
    snprintf(p, sizeof p, cands[i], d);
    snprintf(probe, sizeof probe, "%s/loom-preload.so", p);
    if (access(probe, R_OK) == 0 && strlen(p) < sizeof plugin_dir) {
      memcpy(plugin_dir, p, strlen(p) + 1); /* fits: checked above */
      return;
    }
  }
}

static int preload_mapped(struct dl_phdr_info *info, size_t size, void *data) {
  (void)size, (void)data;
  const char *slash = info->dlpi_name ? strrchr(info->dlpi_name, '/') : NULL;
  return slash && !strcmp(slash + 1, "loom-preload.so");
}

typedef struct origins {
  char **v;
  size_t n;
} origins;

static void add_origin(const loom_backend_info *b, void *ud) {
  origins *o = ud;
  char **v = realloc(o->v, (o->n + 1) * sizeof *v);
  if (!v) return;
  o->v = v;
  char *real = realpath(b->origin, NULL);
  o->v[o->n++] = real ? real : strdup(b->origin);
}

static int registered(const char *path) {
  origins o = {0};
  loom_backends_list(add_origin, &o);
  int found = 0;
  for (size_t i = 0; i < o.n; i++) {
    found |= o.v[i] && !strcmp(o.v[i], path);
    free(o.v[i]);
  }
  free(o.v);
  return found;
}

static int by_name(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

static void load_folder(const char *dir) {
  DIR *d = opendir(dir);
  if (!d) return;
  char *names[128];
  size_t n = 0;
  for (struct dirent *e; (e = readdir(d)) != NULL && n < 128;) {
    size_t len = strlen(e->d_name);
    if (len > 11 && !strncmp(e->d_name, "libloom-", 8) && !strcmp(e->d_name + len - 3, ".so") &&
        asprintf(&names[n], "%s/%s", dir, e->d_name) >= 0)
      n++;
  }
  closedir(d);
  qsort(names, n, sizeof *names, by_name);
  for (size_t i = 0; i < n; i++) {
    if (!registered(names[i])) loom_plugin_load(names[i]); /* failures: warnings */
    free(names[i]);
  }
}

/* $SELF and $DIR of an enable setting (tools/loom/enable.c's rule). */
static char *subst(const char *value, const char *self) {
  char dirbuf[PATH_MAX];
  snprintf(dirbuf, sizeof dirbuf, "%s", self);
  const char *dir = dirname(dirbuf);
  size_t cap = strlen(value) + 1;
  for (const char *p = value; *p; p++) cap += strlen(self) + strlen(dir);
  char *out = malloc(cap), *w = out;
  for (const char *p = value; out && *p;) {
    if (!strncmp(p, "$SELF", 5)) w = stpcpy(w, self), p += 5;
    else if (!strncmp(p, "$DIR", 4)) w = stpcpy(w, dir), p += 4;
    else *w++ = *p++;
  }
  if (out) *w = 0;
  return out;
}

static void apply_env(const loom_env_setting *e, const char *self) {
  char *v = subst(e->value, self);
  if (!v) return;
  const char *old = getenv(e->name);
  if (e->how == LOOM_ENV_PREPEND_PATH && old && *old) {
    if (!strstr(old, v)) {
      char *both = NULL;
      if (asprintf(&both, "%s:%s", v, old) >= 0) setenv(e->name, both, 1);
      free(both);
    }
  } else if (e->how != LOOM_ENV_SET_IF_UNSET || !old) {
    setenv(e->name, v, 1);
  }
  free(v);
}

static void enable_one(const loom_backend_info *b, void *ud) {
  (void)ud;
  if (b->struct_size < offsetof(loom_backend_info, enable) + sizeof b->enable || !b->enable)
    return;
  const loom_backend_enable *en = b->enable;
  if (en->flags & LOOM_ENABLE_F_PRELOAD_SELF) return; /* only a preload can */
  for (uint32_t i = 0; i < en->nenv; i++) apply_env(&en->env[i], b->origin);
}

static int in_recorded_process(void) { return dl_iterate_phdr(preload_mapped, NULL) != 0; }

/* _setup(): loads the plug-ins and applies their environment; idempotent.
 * Returns True when this process is one `loom record` runs. */
static PyObject *py_setup(PyObject *self, PyObject *noargs) {
  static int done;
  int recorded = in_recorded_process();
  if (!done && !recorded) {
    done = 1;
    char *old_log = getenv("LOOM_LOG") ? strdup(getenv("LOOM_LOG")) : NULL;
    setenv("LOOM_LOG", "error", 0); /* failed plug-ins: their state says why */
    Py_BEGIN_ALLOW_THREADS
    loom_init();
    if (plugin_dir[0]) load_folder(plugin_dir);
    loom_backends_list(enable_one, NULL);
    Py_END_ALLOW_THREADS
    if (old_log) setenv("LOOM_LOG", old_log, 1);
    else unsetenv("LOOM_LOG");
    free(old_log);
  }
  return PyBool_FromLong(recorded);
}

/* ---- backends() ---------------------------------------------------------------- */
static void kinds_list(PyObject *l, uint32_t mask) {
  for (int k = 0; k < LOOM_KIND_COUNT_; k++) {
    if (!(mask & LOOM_KIND_BIT(k))) continue;
    PyObject *s = PyUnicode_FromString(loom_kind_name((loom_kind)k));
    if (s) PyList_Append(l, s);
    Py_XDECREF(s);
  }
}

static void add_backend(const loom_backend_info *b, void *ud) {
  static const char *const states[] = {"registered", "available", "unavailable"};
  PyObject *l = ud, *kinds = PyList_New(0);
  if (!kinds) return;
  kinds_list(kinds, b->kinds);
  int preload = b->struct_size > offsetof(loom_backend_info, enable) && b->enable &&
                (b->enable->flags & LOOM_ENABLE_F_PRELOAD_SELF);
  PyObject *d = Py_BuildValue("{s:s,s:s,s:s,s:N,s:s,s:s,s:O}", "name", b->name, "device_type",
                              b->device_type, "origin", b->origin, "kinds", kinds, "state",
                              (unsigned)b->state < 3 ? states[b->state] : "?", "reason",
                              b->reason ? b->reason : "", "needs_preload",
                              preload ? Py_True : Py_False);
  if (d) PyList_Append(l, d);
  Py_XDECREF(d);
}

static PyObject *py_backends(PyObject *self, PyObject *args) {
  int probe = 1;
  if (!PyArg_ParseTuple(args, "|p", &probe)) return NULL;
  if (probe) { /* as `loom backends`: a discarded session over every type */
    loom_session_config cfg = {.struct_size = sizeof cfg, .devices = "all"};
    loom_session *s = NULL;
    loom_status st;
    Py_BEGIN_ALLOW_THREADS
    st = loom_session_create(&cfg, &s);
    if (st == LOOM_OK) loom_session_destroy(s);
    Py_END_ALLOW_THREADS
    if (st != LOOM_OK) return lpy_raise(st);
  }
  PyObject *l = PyList_New(0);
  if (!l) return NULL;
  loom_backends_list(add_backend, l);
  if (PyErr_Occurred()) {
    Py_DECREF(l);
    return NULL;
  }
  return l;
}

/* ---- the framework adapter in-process (torch_ops) ------------------------------- */
/* _attach_adapter(shim_file, init_symbol): libloom is made global (the
 * adapter finds loom.h's functions as any preloaded adapter does), then the
 * adapter's C++ part is loaded from the plug-in folder and initialised once. */
static PyObject *py_attach(PyObject *self, PyObject *args) {
  const char *file, *sym;
  static int attached;
  if (!PyArg_ParseTuple(args, "ss", &file, &sym)) return NULL;
  if (attached) Py_RETURN_FALSE;
  if (!plugin_dir[0])
    return lpy_raise_msg(LOOM_ENOTFOUND, "no plug-in folder next to libloom (plugins/ in a "
                         "build tree, lib/loom/ installed)");
  char path[PATH_MAX + 64], msg[PATH_MAX + 512];
  snprintf(path, sizeof path, "%s/%s", plugin_dir, file);
  if (!dlopen(lib_path, RTLD_NOW | RTLD_GLOBAL | RTLD_NOLOAD)) {
    snprintf(msg, sizeof msg, "cannot make %s global: %s", lib_path, dlerror());
    return lpy_raise_msg(LOOM_EBACKEND, msg);
  }
  void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  int (*init)(void) = h ? (int (*)(void))(uintptr_t)dlsym(h, sym) : NULL;
  if (!init) {
    snprintf(msg, sizeof msg, "cannot load the adapter %s: %s", path, dlerror());
    return lpy_raise_msg(LOOM_ENOTFOUND, msg);
  }
  if (init() != 0) {
    snprintf(msg, sizeof msg, "the adapter %s failed to initialise", path);
    return lpy_raise_msg(LOOM_EBACKEND, msg);
  }
  attached = 1;
  Py_RETURN_TRUE;
}

static PyObject *py_kind_names(PyObject *self, PyObject *noargs) {
  PyObject *l = PyList_New(0);
  if (l) kinds_list(l, LOOM_KINDS_ALL);
  return l;
}

static PyObject *py_meta_set(PyObject *self, PyObject *args) {
  const char *k, *v;
  if (!PyArg_ParseTuple(args, "sz", &k, &v)) return NULL;
  loom_status st = loom_meta_set(k, v);
  if (st) return lpy_raise(st);
  Py_RETURN_NONE;
}

static PyObject *py_live(PyObject *self, PyObject *noargs) {
  return Py_BuildValue("{s:n,s:n}", "traces", lpy_live_traces, "sessions", lpy_live_sessions);
}

static PyMethodDef module_methods[] = {
    {"_live", py_live, METH_NOARGS, "C objects alive: {traces, sessions} (tests, debugging)"},
    {"_setup", py_setup, METH_NOARGS, "load plug-ins in-process (idempotent)"},
    {"backends", py_backends, METH_VARARGS, "backends(probe=True) -> list of dicts"},
    {"_attach_adapter", py_attach, METH_VARARGS, "load a framework adapter in-process"},
    {"kind_names", py_kind_names, METH_NOARGS, "record kind names, in value order"},
    {"meta_set", py_meta_set, METH_VARARGS, "meta_set(key, value): trace metadata"},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef module_def = {PyModuleDef_HEAD_INIT, "_loom",
                                        "loom's C layer (see the loom package)", -1,
                                        module_methods, NULL, NULL, NULL, NULL};

static int add_methods(PyObject *m, PyMethodDef *defs) {
  for (PyMethodDef *d = defs; d->ml_name; d++) {
    PyObject *f = PyCFunction_NewEx(d, NULL, NULL);
    if (!f || PyModule_AddObject(m, d->ml_name, f) < 0) return -1;
  }
  return 0;
}

PyMODINIT_FUNC PyInit__loom(void) {
  if (PyType_Ready(&lpy_range_type) < 0 || PyType_Ready(&lpy_trace_type) < 0 ||
      PyType_Ready(&lpy_session_type) < 0)
    return NULL;
  PyObject *m = PyModule_Create(&module_def);
  if (!m) return NULL;
  lpy_error = PyErr_NewExceptionWithDoc("loom.Error",
                                        "a failed loom call: str() is loom's message, status "
                                        "and status_name its loom_status", NULL, NULL);
  find_dirs();
  Py_INCREF(&lpy_range_type);
  Py_INCREF(&lpy_trace_type);
  Py_INCREF(&lpy_session_type);
  if (!lpy_error || PyModule_AddObject(m, "Error", lpy_error) < 0 ||
      PyModule_AddObject(m, "range", (PyObject *)&lpy_range_type) < 0 ||
      PyModule_AddObject(m, "Trace", (PyObject *)&lpy_trace_type) < 0 ||
      PyModule_AddObject(m, "Session", (PyObject *)&lpy_session_type) < 0 ||
      add_methods(m, lpy_annot_methods) < 0 || add_methods(m, lpy_trace_functions) < 0 ||
      PyModule_AddStringConstant(m, "version", loom_version_string()) < 0 ||
      PyModule_AddStringConstant(m, "library", lib_path) < 0 ||
      PyModule_AddStringConstant(m, "plugin_dir", plugin_dir) < 0 || lpy_annot_init(m) < 0) {
    Py_DECREF(m);
    return NULL;
  }
  Py_INCREF(lpy_error);
  return m;
}
