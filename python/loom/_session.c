/*
 * _session.c - loom._Session over loom_session: create (backends probed and
 * configured), start, stop (the trace), and the windows the core's
 * controller (src/window/trigger.c) ends while the session records: each is
 * handed to the session's window callback, on the thread that ended it
 * (the one calling step(), or the controller's timer thread), with the GIL
 * taken for the call.  Without a callback a window is written to its
 * output name, as the core does.  An exception in the callback is kept and
 * raised by the session's next step() or stop().
 *
 * Long calls (create, start, stop, step, destroy) run without the GIL: a
 * window ending in them calls back into Python.
 */
#include "_loom.h"

#include <stdatomic.h>


typedef struct {
  PyObject_HEAD
  loom_session *s;
  int started;
  PyObject *callback;          /* callback(trace, out, seq) or None */
  PyObject *err_type, *err_value, *err_tb; /* the callback's exception */
} lpy_session;

/* The Python session whose windows the done function serves (GIL held to
 * change it; read without it only to decide whether to take the GIL). */
static _Atomic(lpy_session *) owner;

static void on_window(loom_trace *t, const char *out, unsigned seq, void *ud) {
  (void)ud;
  if (!atomic_load(&owner) || _Py_IsFinalizing()) {
    if (loom_trace_save(t, out) != LOOM_OK)
      fprintf(stderr, "loom: window %u: %s\n", seq, loom_last_error());
    return;
  }
  PyGILState_STATE g = PyGILState_Ensure();
  lpy_session *s = atomic_load(&owner);
  if (!s || s->callback == Py_None) {
    loom_status st;
    Py_BEGIN_ALLOW_THREADS
    st = loom_trace_save(t, out);
    Py_END_ALLOW_THREADS
    if (st != LOOM_OK) fprintf(stderr, "loom: window %u: %s\n", seq, loom_last_error());
    PyGILState_Release(g);
    return;
  }
  Py_INCREF(s);
  PyObject *tr = lpy_trace_borrow(t);
  PyObject *r = tr ? PyObject_CallFunction(s->callback, "OsI", tr, out, seq) : NULL;
  if (!r && !s->err_type) PyErr_Fetch(&s->err_type, &s->err_value, &s->err_tb);
  PyErr_Clear();
  Py_XDECREF(r);
  if (tr) {
    lpy_trace_unborrow(tr); /* the core frees t when we return */
    Py_DECREF(tr);
  }
  Py_DECREF(s);
  PyGILState_Release(g);
}

Py_ssize_t lpy_live_sessions;

static PyObject *session_new(PyTypeObject *type, PyObject *args, PyObject *kw) {
  static char *kwlist[] = {"devices", "kinds", "options", "name", "callback", NULL};
  const char *devices = NULL, *options = NULL, *name = NULL;
  unsigned int kinds = 0;
  PyObject *cb = Py_None;
  if (!PyArg_ParseTupleAndKeywords(args, kw, "|zIzzO:_Session", kwlist, &devices, &kinds,
                                   &options, &name, &cb))
    return NULL;
  if (cb != Py_None && !PyCallable_Check(cb)) {
    PyErr_SetString(PyExc_TypeError, "the window callback must be callable or None");
    return NULL;
  }
  loom_session_config cfg = {.struct_size = sizeof cfg, .devices = devices, .kinds = kinds,
                             .options = options, .name = name};
  loom_session *s = NULL;
  loom_status st;
  Py_BEGIN_ALLOW_THREADS
  st = loom_session_create(&cfg, &s);
  Py_END_ALLOW_THREADS
  if (st) return lpy_raise(st);
  lpy_session *o = (lpy_session *)type->tp_alloc(type, 0);
  if (!o) {
    loom_session_destroy(s);
    return NULL;
  }
  o->s = s;
  lpy_live_sessions++;
  Py_INCREF(cb);
  o->callback = cb;
  return (PyObject *)o;
}

static void destroy(lpy_session *o) {
  loom_session *s = o->s;
  o->s = NULL;
  if (!s) return;
  lpy_live_sessions--;
  Py_BEGIN_ALLOW_THREADS
  loom_session_destroy(s); /* a window in progress is still delivered */
  Py_END_ALLOW_THREADS
  if (atomic_load(&owner) == o) atomic_store(&owner, NULL);
}

/* The callback is usually a bound method of the loom.profile holding this
 * session: a cycle, which the collector can break only if it sees it. */
static int session_traverse(lpy_session *o, visitproc visit, void *arg) {
  Py_VISIT(o->callback);
  Py_VISIT(o->err_type);
  Py_VISIT(o->err_value);
  Py_VISIT(o->err_tb);
  return 0;
}

static int session_clear(lpy_session *o) {
  destroy(o); /* first: a window it ends still finds its callback */
  Py_INCREF(Py_None);
  Py_XSETREF(o->callback, Py_None);
  Py_CLEAR(o->err_type);
  Py_CLEAR(o->err_value);
  Py_CLEAR(o->err_tb);
  return 0;
}

static void session_dealloc(lpy_session *o) {
  PyObject_GC_UnTrack(o);
  destroy(o);
  Py_XDECREF(o->callback);
  Py_XDECREF(o->err_type);
  Py_XDECREF(o->err_value);
  Py_XDECREF(o->err_tb);
  Py_TYPE(o)->tp_free((PyObject *)o);
}

static loom_session *live(lpy_session *o) {
  if (!o->s) lpy_raise_msg(LOOM_ESTATE, "the session is closed");
  return o->s;
}

/* Raises the callback's exception kept since the last call, if any. */
static int reraise(lpy_session *o) {
  if (!o->err_type) return 0;
  PyErr_Restore(o->err_type, o->err_value, o->err_tb);
  o->err_type = o->err_value = o->err_tb = NULL;
  return -1;
}

static PyObject *session_start(lpy_session *o, PyObject *noargs) {
  loom_session *s = live(o);
  if (!s) return NULL;
  lpy_session *prev = atomic_exchange(&owner, o);
  loom_status st;
  Py_BEGIN_ALLOW_THREADS
  st = loom_session_start(s);
  Py_END_ALLOW_THREADS
  if (st) {
    atomic_store(&owner, prev);
    return lpy_raise(st);
  }
  /* Only once this process's session is ours: under `loom record` the
   * preload's session records and start failed above (its done function,
   * which writes its windows, stays). */
  static int done_set;
  if (!done_set) loom_window_callback_set(on_window, NULL), done_set = 1;
  o->started = 1;
  Py_RETURN_NONE;
}

static PyObject *session_stop(lpy_session *o, PyObject *noargs) {
  loom_session *s = live(o);
  if (!s) return NULL;
  loom_trace *t = NULL;
  loom_status st;
  Py_BEGIN_ALLOW_THREADS
  st = loom_session_stop(s, &t);
  Py_END_ALLOW_THREADS
  if (st) return lpy_raise(st);
  o->started = 0;
  if (reraise(o)) {
    loom_trace_free(t);
    return NULL;
  }
  if (!t) Py_RETURN_NONE;
  return lpy_trace_wrap(t);
}

static PyObject *session_step(lpy_session *o, PyObject *noargs) {
  if (!live(o)) return NULL;
  Py_BEGIN_ALLOW_THREADS
  loom_step();
  Py_END_ALLOW_THREADS
  if (reraise(o)) return NULL;
  Py_RETURN_NONE;
}

static PyObject *session_close(lpy_session *o, PyObject *noargs) {
  destroy(o);
  if (reraise(o)) return NULL;
  Py_RETURN_NONE;
}

static PyObject *session_warnings(lpy_session *o, PyObject *noargs) {
  loom_session *s = live(o);
  if (!s) return NULL;
  size_t n = loom_session_warning_count(s);
  PyObject *l = PyList_New(0);
  for (size_t i = 0; l && i < n; i++) {
    const char *w = loom_session_warning(s, i);
    PyObject *x = w ? PyUnicode_DecodeUTF8(w, (Py_ssize_t)strlen(w), "replace") : NULL;
    if (!x || PyList_Append(l, x) < 0) Py_CLEAR(l);
    Py_XDECREF(x);
  }
  return l;
}

static PyObject *session_dump(lpy_session *o, PyObject *args) {
  const char *reason = "python";
  if (!PyArg_ParseTuple(args, "|s:dump", &reason)) return NULL;
  loom_session *s = live(o);
  if (!s) return NULL;
  loom_trace *t = NULL;
  loom_status st;
  Py_BEGIN_ALLOW_THREADS
  st = loom_session_dump(s, reason, &t);
  Py_END_ALLOW_THREADS
  if (st) return lpy_raise(st);
  return lpy_trace_wrap(t);
}

static PyMethodDef session_methods[] = {
    {"start", (PyCFunction)session_start, METH_NOARGS, "start recording"},
    {"stop", (PyCFunction)session_stop, METH_NOARGS, "stop: the trace, or None with windows"},
    {"step", (PyCFunction)session_step, METH_NOARGS, "end the step, begin the next"},
    {"close", (PyCFunction)session_close, METH_NOARGS, "destroy the session now"},
    {"warnings", (PyCFunction)session_warnings, METH_NOARGS, "the session's warnings"},
    {"dump", (PyCFunction)session_dump, METH_VARARGS, "dump(reason): ring mode's window"},
    {NULL, NULL, 0, NULL}};

static PyObject *session_started(lpy_session *o, void *c) { return PyBool_FromLong(o->started); }
static PyGetSetDef session_getset[] = {
    {"started", (getter)session_started, NULL, "recording now", NULL},
    {NULL, NULL, NULL, NULL, NULL}};

PyTypeObject lpy_session_type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "loom._Session",
    .tp_basicsize = sizeof(lpy_session),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_doc = "a loom session (see loom.profile)",
    .tp_traverse = (traverseproc)session_traverse,
    .tp_clear = (inquiry)session_clear,
    .tp_free = PyObject_GC_Del,
    .tp_new = session_new,
    .tp_dealloc = (destructor)session_dealloc,
    .tp_methods = session_methods,
    .tp_getset = session_getset,
};
