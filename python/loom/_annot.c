/*
 * _annot.c - annotations from Python: loom.range (a context manager and,
 * through the package, a decorator), mark, counter, step, thread names.
 *
 * Names: loom interns strings for ever (process-wide ids), so each distinct
 * Python string is interned once and its id cached here; a range's enter
 * and exit then cost one loom call each (loom_range_push_id, loom_range_pop).
 * loom_instant and loom_counter keep the name pointer until the session is
 * collected: their names are kept alive here, once per distinct name.
 */
#include "_loom.h"

static PyObject *ids;        /* str -> int (loom_string_id) */
static PyObject *kept;       /* str -> bytes (a name loom points into) */
static PyObject *decorator;  /* the package's decorate(range, func) */

typedef struct {
  PyObject_HEAD
  loom_string_id id;
  PyObject *name;
} lpy_range;

static loom_string_id name_id(PyObject *name) {
  PyObject *v = PyDict_GetItemWithError(ids, name);
  if (v) return (loom_string_id)PyLong_AsUnsignedLong(v);
  if (PyErr_Occurred()) return 0;
  const char *s = PyUnicode_AsUTF8(name);
  if (!s) return 0;
  loom_string_id id = loom_string_id_of(s);
  if (!id) {
    lpy_raise(LOOM_ENOMEM);
    return 0;
  }
  PyObject *n = PyLong_FromUnsignedLong(id);
  if (!n || PyDict_SetItem(ids, name, n) < 0) id = 0;
  Py_XDECREF(n);
  return id;
}

static const char *kept_name(PyObject *name) {
  PyObject *b = PyDict_GetItemWithError(kept, name);
  if (!b) {
    if (PyErr_Occurred()) return NULL;
    b = PyUnicode_AsUTF8String(name);
    if (!b) return NULL;
    int rc = PyDict_SetItem(kept, name, b);
    Py_DECREF(b);
    if (rc < 0) return NULL;
  }
  return PyBytes_AS_STRING(b);
}

static PyObject *range_new(PyTypeObject *type, PyObject *args, PyObject *kw) {
  PyObject *name;
  static char *kwlist[] = {"name", NULL};
  if (!PyArg_ParseTupleAndKeywords(args, kw, "U:range", kwlist, &name)) return NULL;
  loom_string_id id = name_id(name);
  if (!id) return NULL;
  lpy_range *r = (lpy_range *)type->tp_alloc(type, 0);
  if (!r) return NULL;
  r->id = id;
  Py_INCREF(name);
  r->name = name;
  return (PyObject *)r;
}

static void range_dealloc(lpy_range *r) {
  Py_XDECREF(r->name);
  Py_TYPE(r)->tp_free((PyObject *)r);
}

static PyObject *range_enter(lpy_range *r, PyObject *noargs) {
  loom_range_push_id(r->id);
  Py_INCREF(r);
  return (PyObject *)r;
}

static PyObject *range_exit(lpy_range *r, PyObject *const *args, Py_ssize_t n) {
  loom_range_pop();
  Py_RETURN_FALSE;
}

/* range(name)(func): the package's decorator, which enters r per call. */
static PyObject *range_call(lpy_range *r, PyObject *args, PyObject *kw) {
  PyObject *func;
  if (kw || !PyArg_ParseTuple(args, "O:range", &func) || !PyCallable_Check(func)) {
    if (!PyErr_Occurred())
      PyErr_SetString(PyExc_TypeError, "loom.range(name) decorates a callable");
    return NULL;
  }
  if (!decorator) {
    PyErr_SetString(PyExc_RuntimeError, "loom.range: the loom package is not initialised");
    return NULL;
  }
  return PyObject_CallFunctionObjArgs(decorator, (PyObject *)r, func, NULL);
}

static PyObject *range_repr(lpy_range *r) {
  return PyUnicode_FromFormat("loom.range(%R)", r->name);
}

static PyMethodDef range_methods[] = {
    {"__enter__", (PyCFunction)range_enter, METH_NOARGS, "push the range"},
    {"__exit__", (PyCFunction)(void (*)(void))range_exit, METH_FASTCALL, "pop the range"},
    {NULL, NULL, 0, NULL}};

static PyObject *range_name(lpy_range *r, void *c) {
  Py_INCREF(r->name);
  return r->name;
}
static PyGetSetDef range_getset[] = {{"name", (getter)range_name, NULL, "the range's name", NULL},
                                     {NULL, NULL, NULL, NULL, NULL}};

PyTypeObject lpy_range_type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "loom.range",
    .tp_basicsize = sizeof(lpy_range),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "range(name): a user range on the calling thread; `with loom.range(\"x\"):` "
              "or `@loom.range(\"x\")` on a function.",
    .tp_new = range_new,
    .tp_dealloc = (destructor)range_dealloc,
    .tp_call = (ternaryfunc)range_call,
    .tp_repr = (reprfunc)range_repr,
    .tp_methods = range_methods,
    .tp_getset = range_getset,
};

/* ---- functions ------------------------------------------------------------------ */
static PyObject *py_push(PyObject *self, PyObject *name) {
  if (!PyUnicode_Check(name)) {
    PyErr_SetString(PyExc_TypeError, "push(name): name must be a str");
    return NULL;
  }
  loom_string_id id = name_id(name);
  if (!id) return NULL;
  loom_range_push_id(id);
  Py_RETURN_NONE;
}

static PyObject *py_pop(PyObject *self, PyObject *noargs) {
  loom_range_pop();
  Py_RETURN_NONE;
}

static PyObject *py_mark(PyObject *self, PyObject *name) {
  if (!PyUnicode_Check(name)) {
    PyErr_SetString(PyExc_TypeError, "mark(name): name must be a str");
    return NULL;
  }
  const char *s = kept_name(name);
  if (!s) return NULL;
  loom_instant(s);
  Py_RETURN_NONE;
}

static PyObject *py_counter(PyObject *self, PyObject *const *args, Py_ssize_t n) {
  if (n != 2 || !PyUnicode_Check(args[0])) {
    PyErr_SetString(PyExc_TypeError, "counter(name, value): a str and a number");
    return NULL;
  }
  double v = PyFloat_AsDouble(args[1]);
  if (v == -1.0 && PyErr_Occurred()) return NULL;
  const char *s = kept_name(args[0]);
  if (!s) return NULL;
  loom_counter(s, v);
  Py_RETURN_NONE;
}

/* loom_step may end or begin a window (a file written, on_trace_ready):
 * called without the GIL. */
static PyObject *py_step(PyObject *self, PyObject *noargs) {
  Py_BEGIN_ALLOW_THREADS
  loom_step();
  Py_END_ALLOW_THREADS
  Py_RETURN_NONE;
}

static PyObject *py_thread_name(PyObject *self, PyObject *args) {
  const char *name;
  unsigned long long tid = 0;
  if (!PyArg_ParseTuple(args, "z|K:thread_name", &name, &tid)) return NULL;
  loom_thread_name(tid, name);
  Py_RETURN_NONE;
}

static PyObject *py_set_decorator(PyObject *self, PyObject *fn) {
  Py_XDECREF(decorator);
  Py_INCREF(fn);
  decorator = fn;
  Py_RETURN_NONE;
}

PyMethodDef lpy_annot_methods[] = {
    {"push", py_push, METH_O, "push(name): open a range on this thread"},
    {"pop", py_pop, METH_NOARGS, "pop(): close the innermost range"},
    {"mark", py_mark, METH_O, "mark(name): an instant event"},
    {"counter", (PyCFunction)(void (*)(void))py_counter, METH_FASTCALL,
     "counter(name, value): a counter sample"},
    {"step", py_step, METH_NOARGS, "step(): end the iteration, begin the next"},
    {"thread_name", py_thread_name, METH_VARARGS,
     "thread_name(name, tid=0): name a thread's track (0: the calling thread)"},
    {"_set_decorator", py_set_decorator, METH_O, NULL},
    {NULL, NULL, 0, NULL}};

int lpy_annot_init(PyObject *m) {
  ids = PyDict_New();
  kept = PyDict_New();
  return ids && kept ? 0 : -1;
}
