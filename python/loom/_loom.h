/*
 * _loom.h - the parts of loom's CPython extension module (_loom), one C
 * layer over libloom.  Python's own code (python/loom/__init__.py) builds
 * the user-facing API on these types; nothing here re-implements loom.
 */
#ifndef LOOM_PY_LOOM_H
#define LOOM_PY_LOOM_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "loom/loom.h"

/* loom.Error: args (message,), attributes status (int) and status_name. */
extern PyObject *lpy_error;
/* Raises loom.Error for st with loom_last_error() (read before any other
 * loom call); returns NULL. */
PyObject *lpy_raise(loom_status st);
/* The same, with a message of the caller's. */
PyObject *lpy_raise_msg(loom_status st, const char *msg);

/* _annot.c: range type and the instrumentation functions. */
extern PyTypeObject lpy_range_type;
extern PyMethodDef lpy_annot_methods[];
int lpy_annot_init(PyObject *m);

/* _trace.c: the Trace type. */
extern PyTypeObject lpy_trace_type;
extern PyMethodDef lpy_trace_functions[];
/* A new Trace owning t (freed with it). */
PyObject *lpy_trace_wrap(loom_trace *t);
/* Makes a borrowed Trace (see _session.c) own a copy of its trace, or
 * detaches it when that fails: after this the borrowed pointer may go. */
void lpy_trace_unborrow(PyObject *trace);
PyObject *lpy_trace_borrow(loom_trace *t);

/* _session.c: the Session type. */
extern PyTypeObject lpy_session_type;

/* Live C objects owned by Python objects (the GIL guards them): traces
 * (_trace.c) and sessions (_session.c); _loom._live() reports them. */
extern Py_ssize_t lpy_live_traces, lpy_live_sessions;

/* _module.c: the plug-in folder found next to libloom ("" when none). */
const char *lpy_plugin_dir(void);

#endif
