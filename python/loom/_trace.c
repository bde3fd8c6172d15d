/*
 * _trace.c - loom.Trace over loom_trace: save (any format by extension),
 * load, summary, events and their arguments, flows, devices, warnings,
 * metadata, memory events, and the report
 * (`loom report`) of a trace file.  Long calls run without the GIL.  A
 * trace is freed by close() (or `with`), else when the object is collected.
 *
 * A window's trace handed to on_trace_ready is the core's until the
 * callback returns (trigger.h): the object borrows it, and when the program
 * kept a reference, it is given its own copy (written to a temporary
 * .pftrace and read back) before the core frees the original.
 */
#define _GNU_SOURCE
#include "_loom.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct {
  PyObject_HEAD
  loom_trace *t;
  int borrowed;
  PyObject *source; /* the file it was loaded from, or None */
} lpy_trace;

Py_ssize_t lpy_live_traces;

/* Frees o's trace when it owns it. */
static void drop(lpy_trace *o) {
  if (o->t && !o->borrowed) {
    loom_trace_free(o->t);
    lpy_live_traces--;
  }
  o->t = NULL;
}

static PyObject *wrap(loom_trace *t, int borrowed, PyObject *source) {
  lpy_trace *o = PyObject_New(lpy_trace, &lpy_trace_type);
  if (!o) {
    if (!borrowed) loom_trace_free(t);
    return NULL;
  }
  if (!borrowed && t) lpy_live_traces++;
  o->t = t;
  o->borrowed = borrowed;
  o->source = source ? source : Py_None;
  Py_INCREF(o->source);
  return (PyObject *)o;
}

PyObject *lpy_trace_wrap(loom_trace *t) { return wrap(t, 0, NULL); }
PyObject *lpy_trace_borrow(loom_trace *t) { return wrap(t, 1, NULL); }

/* A temporary file name ending in suffix (the caller unlinks it); 0 or -1. */
static int temp_name(char *buf, size_t n, const char *suffix) {
  const char *dir = getenv("TMPDIR");
  snprintf(buf, n, "%s/loom-py-XXXXXX%s", dir && *dir ? dir : "/tmp", suffix);
  int fd = mkstemps(buf, (int)strlen(suffix));
  if (fd < 0) return -1;
  close(fd);
  return 0;
}

void lpy_trace_unborrow(PyObject *obj) {
  lpy_trace *o = (lpy_trace *)obj;
  if (!o->borrowed) return;
  loom_trace *t = o->t, *copy = NULL;
  o->t = NULL;
  o->borrowed = 0;
  if (Py_REFCNT(obj) <= 1 || !t) return; /* nobody kept it */
  char tmp[4096];
  if (temp_name(tmp, sizeof tmp, ".pftrace") != 0) return;
  Py_BEGIN_ALLOW_THREADS
  if (loom_trace_save(t, tmp) == LOOM_OK && loom_trace_load(tmp, &copy) != LOOM_OK) copy = NULL;
  unlink(tmp);
  Py_END_ALLOW_THREADS
  o->t = copy;
  if (copy) lpy_live_traces++;
}

static void trace_dealloc(lpy_trace *o) {
  drop(o);
  Py_XDECREF(o->source);
  PyObject_Free(o);
}

static loom_trace *live(lpy_trace *o) {
  if (!o->t) lpy_raise_msg(LOOM_ESTATE, "the trace is closed (close() or the end of its "
                           "`with` block freed it)");
  return o->t;
}

static PyObject *trace_close(lpy_trace *o, PyObject *noargs) {
  drop(o);
  Py_RETURN_NONE;
}

static PyObject *trace_enter(lpy_trace *o, PyObject *noargs) {
  Py_INCREF(o);
  return (PyObject *)o;
}

static PyObject *trace_exit(lpy_trace *o, PyObject *args) {
  Py_XDECREF(trace_close(o, NULL));
  Py_RETURN_FALSE;
}

static PyObject *trace_save(lpy_trace *o, PyObject *args) {
  PyObject *pathobj;
  if (!PyArg_ParseTuple(args, "O&:save", PyUnicode_FSConverter, &pathobj)) return NULL;
  loom_trace *t = live(o);
  loom_status st = LOOM_OK;
  if (t) {
    Py_BEGIN_ALLOW_THREADS
    st = loom_trace_save(t, PyBytes_AS_STRING(pathobj));
    Py_END_ALLOW_THREADS
  }
  Py_DECREF(pathobj);
  if (!t) return NULL;
  if (st) return lpy_raise(st);
  Py_RETURN_NONE;
}

static PyObject *trace_summary(lpy_trace *o, PyObject *noargs) {
  loom_trace *t = live(o);
  if (!t) return NULL;
  loom_trace_summary s = {.struct_size = sizeof s};
  loom_status st = loom_trace_summarize(t, &s);
  if (st) return lpy_raise(st);
  return Py_BuildValue("{s:K,s:K,s:K,s:K,s:K,s:L,s:L}", "events", s.events, "flows", s.flows,
                       "devices", s.devices, "dropped", s.dropped, "warnings", s.warnings,
                       "start_ns", (long long)s.start_ns, "end_ns", (long long)s.end_ns);
}

static PyObject *trace_warnings(lpy_trace *o, PyObject *noargs) {
  loom_trace *t = live(o);
  if (!t) return NULL;
  size_t n = loom_trace_warning_count(t);
  PyObject *l = PyList_New((Py_ssize_t)n);
  for (size_t i = 0; l && i < n; i++) {
    PyObject *s = PyUnicode_DecodeUTF8(loom_trace_warning(t, i),
                                       (Py_ssize_t)strlen(loom_trace_warning(t, i)), "replace");
    if (!s) {
      Py_CLEAR(l);
      break;
    }
    PyList_SET_ITEM(l, (Py_ssize_t)i, s);
  }
  return l;
}

static PyObject *str_or_none(const char *s) {
  if (!s) Py_RETURN_NONE;
  return PyUnicode_DecodeUTF8(s, (Py_ssize_t)strlen(s), "replace");
}

/* One event as a tuple, in the order of the package's Event fields. */
static PyObject *event_tuple(const loom_event_view *v) {
  const char *kind = loom_kind_name(v->kind);
  char ph[2] = {v->phase ? v->phase : '?', 0};
  PyObject *dev = v->device == UINT32_MAX ? (Py_INCREF(Py_None), Py_None)
                                          : PyLong_FromUnsignedLong(v->device);
  return Py_BuildValue("(NNssLLLLKKNOOI)", str_or_none(v->name), str_or_none(v->category),
                       kind ? kind : "?", ph, (long long)v->start_ns, (long long)v->dur_ns,
                       (long long)v->pid, (long long)v->tid, (unsigned long long)v->correlation,
                       (unsigned long long)v->external_id, dev,
                       v->unclosed ? Py_True : Py_False, v->projected ? Py_True : Py_False,
                       (unsigned)v->roles);
}

/* _events(start=0, count=-1): a list of event tuples. */
static PyObject *trace_events(lpy_trace *o, PyObject *args) {
  Py_ssize_t start = 0, count = -1;
  if (!PyArg_ParseTuple(args, "|nn:_events", &start, &count)) return NULL;
  loom_trace *t = live(o);
  if (!t) return NULL;
  size_t n = loom_trace_event_count(t);
  size_t a = start < 0 ? 0 : (size_t)start > n ? n : (size_t)start;
  size_t b = count < 0 || a + (size_t)count > n ? n : a + (size_t)count;
  PyObject *l = PyList_New((Py_ssize_t)(b - a));
  for (size_t i = a; l && i < b; i++) {
    loom_event_view v = {.struct_size = sizeof v};
    loom_status st = loom_trace_event(t, i, &v);
    PyObject *e = st ? lpy_raise(st) : event_tuple(&v);
    if (!e) {
      Py_CLEAR(l);
      break;
    }
    PyList_SET_ITEM(l, (Py_ssize_t)(i - a), e);
  }
  return l;
}

/* One argument's value: ints, doubles, strings (a nested value read from a
 * file comes as its JSON text, as loom_trace_event_args says). */
static PyObject *arg_value(const loom_arg *a) {
  switch (a->type) {
  case LOOM_ARG_INT: return PyLong_FromLongLong((long long)a->v.i);
  case LOOM_ARG_UINT: return PyLong_FromUnsignedLongLong((unsigned long long)a->v.u);
  case LOOM_ARG_DOUBLE: return PyFloat_FromDouble(a->v.d);
  default: return str_or_none(a->v.s);
  }
}

static PyObject *args_dict(const loom_trace *t, size_t i) {
  loom_arg buf[32];
  size_t n = loom_trace_event_args(t, i, buf, 32);
  loom_arg *a = n > 32 ? malloc(n * sizeof *a) : buf;
  if (!a) return PyErr_NoMemory();
  if (a != buf) loom_trace_event_args(t, i, a, n);
  PyObject *d = PyDict_New();
  for (size_t k = 0; d && k < n; k++) {
    PyObject *v = arg_value(&a[k]);
    if (!v || PyDict_SetItemString(d, a[k].key ? a[k].key : "", v) < 0) Py_CLEAR(d);
    Py_XDECREF(v);
  }
  if (a != buf) free(a);
  return d;
}

/* _args(indices): the arguments of the events at those indices, one dict
 * each (key -> int, float or str). */
static PyObject *trace_args(lpy_trace *o, PyObject *args) {
  PyObject *idx;
  if (!PyArg_ParseTuple(args, "O:_args", &idx)) return NULL;
  loom_trace *t = live(o);
  PyObject *seq = t ? PySequence_Fast(idx, "_args: a sequence of event indices") : NULL;
  if (!seq) return NULL;
  Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
  size_t count = loom_trace_event_count(t);
  PyObject *l = PyList_New(n);
  for (Py_ssize_t k = 0; l && k < n; k++) {
    Py_ssize_t i = PyNumber_AsSsize_t(PySequence_Fast_GET_ITEM(seq, k), PyExc_IndexError);
    PyObject *d = NULL;
    if (i >= 0 && (size_t)i < count) d = args_dict(t, (size_t)i);
    else if (!PyErr_Occurred()) PyErr_SetString(PyExc_IndexError, "event index out of range");
    if (!d) {
      Py_CLEAR(l);
      break;
    }
    PyList_SET_ITEM(l, k, d);
  }
  Py_DECREF(seq);
  return l;
}

/* _meta(): the trace's metadata as a dict of strings. */
static PyObject *trace_meta(lpy_trace *o, PyObject *noargs) {
  loom_trace *t = live(o);
  PyObject *d = t ? PyDict_New() : NULL;
  size_t n = d ? loom_trace_meta_count(t) : 0;
  for (size_t i = 0; d && i < n; i++) {
    const char *k = NULL, *v = NULL;
    if (loom_trace_meta(t, i, &k, &v) != LOOM_OK || !k) continue;
    PyObject *s = str_or_none(v);
    if (!s || PyDict_SetItemString(d, k, s) < 0) Py_CLEAR(d);
    Py_XDECREF(s);
  }
  return d;
}

static PyObject *trace_len(lpy_trace *o, PyObject *noargs) {
  loom_trace *t = live(o);
  return t ? PyLong_FromSize_t(loom_trace_event_count(t)) : NULL;
}

static PyObject *trace_flows(lpy_trace *o, PyObject *noargs) {
  loom_trace *t = live(o);
  if (!t) return NULL;
  size_t n = loom_trace_flow_count(t);
  PyObject *l = PyList_New((Py_ssize_t)n);
  for (size_t i = 0; l && i < n; i++) {
    size_t from = 0, to = 0;
    loom_status st = loom_trace_flow(t, i, &from, &to);
    PyObject *p = st ? lpy_raise(st) : Py_BuildValue("(nn)", (Py_ssize_t)from, (Py_ssize_t)to);
    if (!p) {
      Py_CLEAR(l);
      break;
    }
    PyList_SET_ITEM(l, (Py_ssize_t)i, p);
  }
  return l;
}

static PyObject *trace_devices(lpy_trace *o, PyObject *noargs) {
  loom_trace *t = live(o);
  if (!t) return NULL;
  size_t n = loom_trace_device_count(t);
  PyObject *l = PyList_New((Py_ssize_t)n);
  for (size_t i = 0; l && i < n; i++) {
    loom_device_view d = {.struct_size = sizeof d};
    loom_status st = loom_trace_device(t, i, &d);
    PyObject *e = st ? lpy_raise(st)
                     : Py_BuildValue("{s:n,s:N,s:N,s:N,s:N,s:N,s:L}", "index", (Py_ssize_t)i,
                                     "name", str_or_none(d.name), "vendor", str_or_none(d.vendor),
                                     "type", str_or_none(d.type), "device_type",
                                     str_or_none(d.device_type), "backend",
                                     str_or_none(d.backend), "pid", (long long)d.pid);
    if (!e) {
      Py_CLEAR(l);
      break;
    }
    PyList_SET_ITEM(l, (Py_ssize_t)i, e);
  }
  return l;
}

/* _memory(): loom_trace_memory's views as tuples, in the order of the
 * package's MEMORY_COLUMNS (without the first, ts in us). */
typedef struct mem_rows {
  const loom_trace *t;
  PyObject *l;
} mem_rows;

static int memory_row(const loom_memory_view *v, void *user) {
  mem_rows *m = user;
  loom_event_view e = {.struct_size = sizeof e};
  if (loom_trace_event(m->t, v->event, &e) != LOOM_OK) e.pid = e.tid = -1;
  PyObject *r = Py_BuildValue(
      "(LLNNNNNNKLKKNsOOLLn)", (long long)v->ts_ns, (long long)v->device, str_or_none(v->kind),
      str_or_none(v->call), str_or_none(v->op), str_or_none(v->range), str_or_none(v->step),
      str_or_none(v->alloc_op), (unsigned long long)v->addr, (long long)v->bytes,
      (unsigned long long)v->allocated, (unsigned long long)v->reserved,
      PyBool_FromLong(v->is_free), v->is_free ? "free" : "alloc",
      v->live_at_start ? Py_True : Py_False, v->unknown ? Py_True : Py_False, (long long)e.pid,
      (long long)e.tid, (Py_ssize_t)v->event);
  if (!r || PyList_Append(m->l, r)) {
    Py_XDECREF(r);
    return 1;
  }
  Py_DECREF(r);
  return 0;
}

static PyObject *trace_memory(lpy_trace *o, PyObject *noargs) {
  loom_trace *t = live(o);
  if (!t) return NULL;
  mem_rows m = {t, PyList_New(0)};
  if (!m.l) return NULL;
  loom_status st = loom_trace_memory(t, memory_row, &m);
  if (PyErr_Occurred()) {
    Py_DECREF(m.l);
    return NULL;
  }
  if (st) {
    Py_DECREF(m.l);
    return lpy_raise(st);
  }
  return m.l;
}

static PyObject *trace_source(lpy_trace *o, void *c) {
  Py_INCREF(o->source);
  return o->source;
}
static PyObject *trace_closed(lpy_trace *o, void *c) { return PyBool_FromLong(o->t == NULL); }

static PyMethodDef trace_methods[] = {
    {"save", (PyCFunction)trace_save, METH_VARARGS,
     "save(path): .json, .json.gz or .pftrace, chosen by the extension"},
    {"summary", (PyCFunction)trace_summary, METH_NOARGS, "counts over the trace (a dict)"},
    {"warnings", (PyCFunction)trace_warnings, METH_NOARGS, "the trace's warnings"},
    {"_events", (PyCFunction)trace_events, METH_VARARGS, NULL},
    {"_len", (PyCFunction)trace_len, METH_NOARGS, NULL},
    {"_memory", (PyCFunction)trace_memory, METH_NOARGS, NULL},
    {"_args", (PyCFunction)trace_args, METH_VARARGS, NULL},
    {"_meta", (PyCFunction)trace_meta, METH_NOARGS, NULL},
    {"flows", (PyCFunction)trace_flows, METH_NOARGS, "flows as (from, to) event indices"},
    {"devices", (PyCFunction)trace_devices, METH_NOARGS, "the devices the trace describes"},
    {"close", (PyCFunction)trace_close, METH_NOARGS, "free the trace now"},
    {"__enter__", (PyCFunction)trace_enter, METH_NOARGS, NULL},
    {"__exit__", (PyCFunction)trace_exit, METH_VARARGS, NULL},
    {NULL, NULL, 0, NULL}};

static PyGetSetDef trace_getset[] = {
    {"source", (getter)trace_source, NULL, "the file it was loaded from, or None", NULL},
    {"closed", (getter)trace_closed, NULL, "True once freed", NULL},
    {NULL, NULL, NULL, NULL, NULL}};

PyTypeObject lpy_trace_type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "loom._Trace",
    .tp_basicsize = sizeof(lpy_trace),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE,
    .tp_doc = "a loom trace (see loom.Trace)",
    .tp_dealloc = (destructor)trace_dealloc,
    .tp_methods = trace_methods,
    .tp_getset = trace_getset,
};

/* ---- module functions ---------------------------------------------------------- */
static PyObject *py_load(PyObject *self, PyObject *args) {
  PyObject *pathobj, *path;
  if (!PyArg_ParseTuple(args, "O&:load", PyUnicode_FSConverter, &pathobj)) return NULL;
  if (!PyArg_ParseTuple(args, "O", &path)) return NULL;
  loom_trace *t = NULL;
  loom_status st;
  Py_BEGIN_ALLOW_THREADS
  st = loom_trace_load(PyBytes_AS_STRING(pathobj), &t);
  Py_END_ALLOW_THREADS
  Py_DECREF(pathobj);
  if (st) return lpy_raise(st);
  return wrap(t, 0, path);
}

/* _report(trace_path, format, out_path, top, hta_last, more): writes the
 * report of a trace file (loom report) to out_path. */
static PyObject *py_report(PyObject *self, PyObject *args) {
  const char *in, *out;
  int fmt, hta_last;
  Py_ssize_t top;
  PyObject *more;
  if (!PyArg_ParseTuple(args, "sisnpO!:_report", &in, &fmt, &out, &top, &hta_last, &PyList_Type,
                        &more))
    return NULL;
  Py_ssize_t nmore = PyList_GET_SIZE(more);
  const char **mv = calloc((size_t)nmore + 1, sizeof *mv);
  if (!mv) return PyErr_NoMemory();
  for (Py_ssize_t i = 0; i < nmore; i++)
    if (!(mv[i] = PyUnicode_AsUTF8(PyList_GET_ITEM(more, i)))) {
      free(mv);
      return NULL;
    }
  loom_report_options o = {.struct_size = sizeof o, .top = (size_t)(top < 0 ? 0 : top),
                           .hta_include_last_step = hta_last, .more_traces = mv,
                           .nmore_traces = (size_t)nmore};
  loom_report *r = NULL;
  loom_status st;
  Py_BEGIN_ALLOW_THREADS
  st = loom_report_open(in, &o, &r);
  if (st == LOOM_OK) {
    st = loom_report_write(r, (loom_report_format)fmt, out);
    loom_report_free(r);
  }
  Py_END_ALLOW_THREADS
  free(mv);
  if (st) return lpy_raise(st);
  Py_RETURN_NONE;
}

/* The strings of a list into a new array (NULL with an exception set). */
static const char **str_list(PyObject *list, Py_ssize_t *n) {
  *n = PyList_GET_SIZE(list);
  const char **v = calloc((size_t)*n + 1, sizeof *v);
  if (!v) return (const char **)PyErr_NoMemory();
  for (Py_ssize_t i = 0; i < *n; i++)
    if (!(v[i] = PyUnicode_AsUTF8(PyList_GET_ITEM(list, i)))) {
      free(v);
      return NULL;
    }
  return v;
}

/* _diff(base, new, format, out_path, top, steps_set, base_step, new_step,
 * alpha, min_change, min_share): writes loom diff of two runs (lists of
 * trace paths) to out_path. */
static PyObject *py_diff(PyObject *self, PyObject *args) {
  PyObject *bl, *nl;
  const char *out;
  int fmt, steps_set;
  Py_ssize_t top, nb, nn;
  long long bs, ns;
  double alpha, min_change, min_share;
  if (!PyArg_ParseTuple(args, "O!O!isnpLLddd:_diff", &PyList_Type, &bl, &PyList_Type, &nl, &fmt,
                        &out, &top, &steps_set, &bs, &ns, &alpha, &min_change, &min_share))
    return NULL;
  const char **bv = str_list(bl, &nb), **nv = bv ? str_list(nl, &nn) : NULL;
  if (!nv) {
    free(bv);
    return NULL;
  }
  loom_diff_options o = {.struct_size = sizeof o, .top = (size_t)(top < 0 ? 0 : top),
                         .steps_set = steps_set, .base_step = bs, .new_step = ns,
                         .alpha = alpha, .min_change = min_change, .min_share = min_share};
  loom_diff *d = NULL;
  loom_status st;
  Py_BEGIN_ALLOW_THREADS
  st = loom_diff_open(bv, (size_t)nb, nv, (size_t)nn, &o, &d);
  if (st == LOOM_OK) {
    st = loom_diff_write(d, (loom_report_format)fmt, out);
    loom_diff_free(d);
  }
  Py_END_ALLOW_THREADS
  free(bv);
  free(nv);
  if (st) return lpy_raise(st);
  Py_RETURN_NONE;
}

PyMethodDef lpy_trace_functions[] = {
    {"_load", py_load, METH_VARARGS, NULL},
    {"_report", py_report, METH_VARARGS, NULL},
    {"_diff", py_diff, METH_VARARGS, NULL},
    {NULL, NULL, 0, NULL}};
