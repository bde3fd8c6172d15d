"""loom from Python: sessions, annotations and traces over libloom.

    import loom
    with loom.profile(devices=["cpu", "opencl"], torch_ops=True) as p:
        with loom.range("train"):
            train()
    p.trace.save("run.json")
    df = p.trace.df()              # pandas, HTA's column names
    print(p.trace.table())         # loom report's tables

Everything here calls libloom through the extension module loom._loom (C,
one call per annotation); see docs/python.md.
"""
import functools
import json
import os
import socket
import tempfile
import warnings as _warnings
from collections import namedtuple

from . import _habits, _loom
from ._habits import tensorboard_trace_handler
from ._loom import Error, counter, mark, pop, push, range, step, thread_name

__all__ = ["Error", "Event", "LoomWarning", "Trace", "backends", "counter", "diff", "load", "mark",
           "pop", "profile", "push", "range", "schedule", "step", "thread_name", "trace_handler"]
__all__ += ["tensorboard_trace_handler"]  # torch.profiler's habits (_habits.py)
__version__ = _loom.version

#: True in a process that `loom record` runs: its session records this
#: process and annotations land there; loom.profile cannot start another.
recorded = _loom._setup()

#: The record kinds, by name, in loom_kind order.
KINDS = tuple(_loom.kind_names())


def _decorate(r, func):
    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        with r:
            return func(*args, **kwargs)
    return wrapper


_loom._set_decorator(_decorate)


def backends(probe=True):
    """The registered backends as dicts: name, device_type, origin, kinds,
    state ("registered", "available", "unavailable"), reason, needs_preload.
    probe=True probes them first, as `loom backends` does."""
    return _loom.backends(bool(probe))


class LoomWarning(UserWarning):
    """A session's warning (a device asked for that cannot be recorded, an
    option ignored, ...), issued by profile.start(); the same text is in
    profile.warnings() and in the trace's warnings."""


# ---- sessions -------------------------------------------------------------------
class schedule:
    """torch.profiler.schedule's meaning: skip_first steps, then cycles of
    wait (nothing), warmup (recorded, discarded) and active steps (recorded,
    one trace per cycle), repeat cycles (0: until the session stops).  A
    step is what profile.step() ends; the first begins at start()."""

    def __init__(self, *, wait=0, warmup=0, active=0, repeat=0, skip_first=0):
        self.wait, self.warmup, self.active = wait, warmup, active
        self.repeat, self.skip_first = repeat, skip_first

    def options(self):
        return {"wait": self.wait, "warmup": self.warmup, "active": self.active,
                "repeat": self.repeat, "skip_first": self.skip_first}

    def __repr__(self):
        return "loom.schedule(%s)" % ", ".join("%s=%s" % kv for kv in self.options().items())


def trace_handler(dir_name, worker_name=None, ext=".json"):
    """on_trace_ready that writes each window to dir_name/WORKER.SEQ.EXT
    (WORKER: host_pid unless given; EXT: .json, .json.gz or .pftrace)."""
    os.makedirs(dir_name, exist_ok=True)
    worker = worker_name or "%s_%d" % (socket.gethostname(), os.getpid())

    def handler(trace):
        path = os.path.join(dir_name, "%s.%d%s" % (worker, trace.window, ext))
        trace.save(path)
        trace.path = path
    return handler


# Options whose windows count steps: the session's first step begins at start().
_STEP_KEYS = ("start_step", "steps", "wait", "warmup", "active", "repeat", "skip_first")


def _option_string(options):
    if options is None:
        return None
    if isinstance(options, str):
        return options
    parts = []
    for k, v in options.items():
        v = "on" if v is True else "off" if v is False else str(v)
        for c in "%,;":  # the option syntax's escapes
            v = v.replace(c, "%%%02X" % ord(c))
        parts.append("%s=%s" % (k, v))
    return ",".join(parts)


def _kind_mask(kinds):
    if kinds is None:
        return 0
    if isinstance(kinds, int):
        return kinds
    if isinstance(kinds, str):
        kinds = [kinds]
    mask = 0
    for k in kinds:
        if k not in KINDS:
            raise ValueError("unknown record kind %r (kinds: %s)" % (k, ", ".join(KINDS)))
        mask |= 1 << KINDS.index(k)
    return mask


_torch_attached = False


def _attach_torch():
    """The PyTorch adapter in this interpreter (what `loom record` preloads):
    its C++ part registers a RecordFunction callback that records every op."""
    global _torch_attached
    if _torch_attached or recorded:  # under loom record the preload attached it
        return
    import torch  # noqa: F401  (libtorch must be in the process first)
    _loom._attach_adapter("loom-pytorch-shim.so", "loom_pytorch_shim_init")
    _torch_attached = True


class profile:
    """A recording session; a context manager, or start()/stop().

    devices: device types ("cpu" is the host annotations; "opencl", ...;
      "all"), a list or a comma-separated string.
    kinds: record kind names (loom.KINDS) to keep; None: all.
    options: session options (docs/triggers.md, docs/ring.md), a dict or
      "k=v,..." string.
    schedule: a loom.schedule; its windows go to on_trace_ready (a
      function of one loom.Trace, valid as long as it is referenced), or,
      without one, to the files of options["output"].
    torch_ops: record PyTorch's operators (the PyTorch adapter in-process).
    The session is made (backends probed, options checked) by start(): one
    exists at a time in a process.  After stop(): p.trace (None with
    windows; p.windows counts them)."""

    def __init__(self, devices=("cpu",), kinds=None, options=None, schedule=None,
                 on_trace_ready=None, torch_ops=False, name=None):
        opts = dict(options) if isinstance(options, dict) else {}
        self._optstr = _option_string(options if not isinstance(options, dict) else opts)
        if schedule is not None:
            opts.update(schedule.options())
            extra = _option_string(schedule.options())
            self._optstr = extra if not self._optstr else self._optstr + "," + extra
        if isinstance(options, str):
            keys = [kv.split("=", 1)[0].strip() for kv in options.replace(";", ",").split(",")]
        else:
            keys = list(opts)
        self._by_step = any(k in _STEP_KEYS for k in keys)
        self.devices = devices if isinstance(devices, str) else ",".join(devices)
        self._kinds = _kind_mask(kinds)
        self.name = name
        self.on_trace_ready = on_trace_ready
        self.torch_ops = torch_ops
        self.trace = None
        self.windows = 0
        self._s = None

    def _new_session(self):
        cb = self._window if self.on_trace_ready is not None else None
        self._s = _loom.Session(devices=self.devices, kinds=self._kinds, options=self._optstr,
                                name=self.name, callback=cb)

    def _window(self, ctrace, out, seq):
        self.windows += 1
        self.on_trace_ready(Trace(ctrace, window=seq, path=out))

    def start(self):
        if self.torch_ops:
            _attach_torch()
        if self._s is None:
            self._new_session()
        self._s.start()
        for w in self._s.warnings():  # what the session cannot record, said now
            _warnings.warn(w, LoomWarning, stacklevel=2)
        if self._by_step:
            self._s.step()  # step 0 begins (torch.profiler's first step)
        return self

    def stop(self):
        if self._s is None:
            raise Error("profile.stop(): the session is not started")
        try:
            t = self._s.stop()
        finally:
            warnings = self._s.warnings() if self._s is not None else []
            self._s.close()
            self._s = None
        self._warnings = warnings
        self.trace = Trace(t) if t is not None else None
        return self.trace

    def step(self):
        """Ends the current step and begins the next (ProfilerStep#N)."""
        if self._s is None:
            raise Error("profile.step(): the session is closed")
        self._s.step()

    def warnings(self):
        return self._s.warnings() if self._s is not None else list(getattr(self, "_warnings", []))

    # torch.profiler's habits (docs/python.md): on the trace of stop().
    def _stopped_trace(self, what):
        if self.trace is None:
            raise Error("profile.%s(): no trace (the session is not stopped, or its windows "
                        "went to on_trace_ready, whose traces have %s too)" % (what, what))
        return self.trace

    def key_averages(self, group_by_input_shape=False, group_by_stack_n=0):
        """torch.profiler's key_averages() of the trace (Trace.key_averages)."""
        return self._stopped_trace("key_averages").key_averages(group_by_input_shape,
                                                                group_by_stack_n)

    def export_chrome_trace(self, path):
        return self._stopped_trace("export_chrome_trace").export_chrome_trace(path)

    def export_stacks(self, path, metric="self_cpu_time_total"):
        return self._stopped_trace("export_stacks").export_stacks(path, metric)

    def _repr_html_(self):
        return None if self.trace is None else self.trace._repr_html_()

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        if self._s is not None and self._s.started:
            self.stop()
        return False

    def __del__(self):
        s = getattr(self, "_s", None)
        if s is not None:
            s.close()


# ---- traces -----------------------------------------------------------------------
Event = namedtuple("Event", "name cat kind ph ts_ns dur_ns pid tid correlation external_id "
                            "device unclosed projected roles")
Event.__doc__ = ("One event of a trace: times in Unix epoch ns; device None for host "
                 "events; correlation/external_id 0 when none.")

# HTA's trace DataFrame names where the concept is the same (ts and dur in us,
# stream the device queue or -1 on the host, -1 for no correlation/external id).
DF_COLUMNS = ["index", "name", "cat", "kind", "ph", "ts", "dur", "pid", "tid", "stream",
              "device", "correlation", "external_id", "ts_ns", "dur_ns", "unclosed",
              "projected"]

# p.trace.memory(): one row per memory event, in time order (docs/memory.md).
MEMORY_COLUMNS = ["ts", "ts_ns", "device", "kind", "call", "op", "range", "step", "alloc_op",
                  "addr", "bytes", "allocated", "reserved", "is_free", "action",
                  "live_at_start", "unknown_free", "pid", "tid", "event"]


def load(path):
    """Reads any trace loom reads (loom or Kineto Chrome JSON, .json.gz,
    .pftrace; detected from the content)."""
    return Trace(_loom._load(os.fspath(path)))


class Trace:
    """A trace: from profile.stop(), a window (on_trace_ready) or load()."""

    _CHUNK = 65536

    def __init__(self, ctrace, window=None, path=None):
        self._t = ctrace
        self.window = window  # the window's number (on_trace_ready), else None
        self.path = path      # its output name (windows), or the loaded file
        if path is None and ctrace.source is not None:
            self.path = ctrace.source

    def save(self, path):
        """Writes the trace; the format follows the extension (.json,
        .json.gz, .pftrace, .pftrace.gz)."""
        self._t.save(os.fspath(path))
        return path

    def summary(self):
        return self._t.summary()

    @property
    def devices(self):
        return self._t.devices()

    @property
    def warnings(self):
        return self._t.warnings()

    @property
    def dropped(self):
        return self._t.summary()["dropped"]

    def flows(self):
        return self._t.flows()

    def __len__(self):
        return self._t._len()

    def events(self):
        """An iterator of loom.Event, by track then start time."""
        start = 0
        while True:
            chunk = self._t._events(start, self._CHUNK)
            if not chunk:
                return
            for e in chunk:
                yield Event._make(e)
            start += len(chunk)

    __iter__ = events

    def df(self):
        """The events as a pandas DataFrame (columns: DF_COLUMNS)."""
        import pandas as pd
        rows = []
        i = 0
        for e in self._t._events(0, -1):
            dev = -1 if e[10] is None else e[10]
            rows.append((i, e[0], e[1], e[2], e[3], e[4] / 1000.0, e[5] / 1000.0, e[6], e[7],
                         -1 if e[10] is None else e[7], dev, e[8] or -1, e[9] or -1, e[4], e[5],
                         e[11], e[12]))
            i += 1
        return pd.DataFrame.from_records(rows, columns=DF_COLUMNS)

    def memory(self):
        """The memory events as a pandas DataFrame (columns: MEMORY_COLUMNS),
        in time order: ts in us and ts_ns in Unix epoch ns; device the
        device's pid, -1 for host memory; kind the memory kind; call the
        call that allocated or freed; op, range and step open around it
        (None when none); alloc_op, for a free, the op that allocated what
        it frees; bytes > 0 allocated, < 0 freed; allocated and reserved:
        the bytes in use (and a pool's reserved) of its device and kind after
        it, the figures of `loom report`'s memory section; unknown_free: a
        free of an address never seen allocated (nothing in use changes)."""
        import pandas as pd
        rows = [(r[0] / 1000.0,) + tuple(None if v == "" else v for v in r)
                for r in self._t._memory()]
        return pd.DataFrame.from_records(rows, columns=MEMORY_COLUMNS)

    def _file(self, stack):
        if self._t.source is not None:
            return self._t.source
        fd, tmp = tempfile.mkstemp(suffix=".pftrace", prefix="loom-py-")
        os.close(fd)
        stack.append(tmp)
        self._t.save(tmp)
        return tmp

    def _report(self, fmt, out, top, include_last_step, more):
        tmps = []
        try:
            _loom._report(self._file(tmps), fmt, out, top, include_last_step,
                          [os.fspath(m) for m in more])
        finally:
            for t in tmps:
                os.unlink(t)

    def _report_text(self, fmt, top, include_last_step, more):
        fd, out = tempfile.mkstemp(prefix="loom-py-report-")
        os.close(fd)
        try:
            self._report(fmt, out, top, include_last_step, more)
            with open(out, encoding="utf-8") as f:
                return f.read()
        finally:
            os.unlink(out)

    def report(self, top=20, include_last_step=False, more=()):
        """`loom report --json` of this trace as a dict (docs/report.md's
        schema); a trace not loaded from a file is analysed from a temporary
        .pftrace of it.  more: further traces (ranks)."""
        return json.loads(self._report_text(1, top, include_last_step, more))

    def table(self, top=20, include_last_step=False, more=()):
        """loom report's text tables, as a string."""
        return self._report_text(0, top, include_last_step, more)

    def html(self, path, top=20, include_last_step=False, more=()):
        """loom report --html: one self-contained page."""
        self._report(2, os.fspath(path), top, include_last_step, more)
        return path

    # torch.profiler's habits (loom/_habits.py, docs/python.md).
    def key_averages(self, group_by_input_shape=False, group_by_stack_n=0):
        """Per-name statistics as torch.profiler's key_averages() gives them:
        a list of FunctionEventAvg (key, count, self_cpu_time_total,
        cpu_time_total, cpu_time, device_time_total, ..., input_shapes; us)
        with .table(sort_by=..., row_limit=...)."""
        if group_by_stack_n:
            raise ValueError("group_by_stack_n: loom's ops carry no Python stacks "
                             "(export_stacks writes the CPU samples' native stacks)")
        return _habits.key_averages(self, group_by_input_shape)

    def export_chrome_trace(self, path):
        """Chrome JSON (gzipped for .gz), .pftrace by its suffix."""
        return _habits.export_chrome_trace(self, path)

    def export_stacks(self, path, metric="self_cpu_time_total"):
        """The CPU samples' call stacks in the collapsed format flame graph
        tools read; metric "self_cpu_time_total" (us) or "samples"."""
        return _habits.export_stacks(self, path, metric)

    def _repr_html_(self):
        """A notebook shows the trace as loom report --html's page."""
        return _habits.repr_html(self)

    def close(self):
        """Frees the trace now (also at the end of a `with` block)."""
        self._t.close()

    @property
    def closed(self):
        return self._t.closed

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    def __repr__(self):
        if self._t.closed:
            return "<loom.Trace closed>"
        s = self._t.summary()
        return "<loom.Trace %d events, %d devices, %d warnings, %d dropped>" % (
            s["events"], s["devices"], s["warnings"], s["dropped"])


def _run_paths(run, stack):
    """A run of loom.diff as a list of paths: a path, a Trace, or a list of them."""
    items = run if isinstance(run, (list, tuple)) else [run]
    return [r._file(stack) if isinstance(r, Trace) else os.fspath(r) for r in items]


def diff(base, new, step=None, steps=None, alpha=0.0, min_change=0.0, min_share=0.0, top=0,
         format="json", html=None):
    """`loom diff BASE NEW` (docs/report.md, "loom diff"): what changed
    between two runs, per kernel, copy direction, op, user range, call,
    step and rank, with the regressions a test across steps finds.  base,
    new: a trace path, a folder of per-rank traces, a Trace, or a list of
    them.  step=N compares ProfilerStep#N of both runs, steps=(B, N) B of
    base with N of new.  alpha, min_change, min_share (fractions; 0: the
    defaults 0.01, 0.10, 0.01; < 0: no minimum).  Returns the JSON document
    ("loom-diff/1") as a dict, or the text for format="text"; html=PATH also
    writes the page."""
    if steps is None and step is not None:
        steps = (step, step)
    fd, out = tempfile.mkstemp(prefix="loom-py-diff-")
    os.close(fd)
    tmps = []
    try:
        b, n = _run_paths(base, tmps), _run_paths(new, tmps)
        sel = steps if steps is not None else (0, 0)
        args = (top, steps is not None, int(sel[0]), int(sel[1]), float(alpha),
                float(min_change), float(min_share))
        fmt = {"text": 0, "json": 1}[format]
        _loom._diff(b, n, fmt, out, *args)
        if html is not None:
            _loom._diff(b, n, 2, os.fspath(html), *args)
        with open(out, encoding="utf-8") as f:
            text = f.read()
        return json.loads(text) if fmt == 1 else text
    finally:
        os.unlink(out)
        for t in tmps:
            os.unlink(t)
