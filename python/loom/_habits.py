"""torch.profiler's habits on loom's traces: key_averages() and its table(),
export_chrome_trace(), export_stacks(), tensorboard_trace_handler() and the
notebook's HTML view, with torch.profiler's names where the figure is the
same (docs/python.md, "torch.profiler's habits").

The averages follow torch.autograd.profiler's rules so that the same run
gives the same rows: the host events (ops, record_function and loom ranges,
runtime calls) nest per thread by time as torch's _populate_cpu_children
nests them, a child with its parent's name that is its only child is folded
into it (torch's _remove_dup_nodes), the profiler's own helper ops are left
out (torch's _filter_name), and ProfilerStep#N is keyed "ProfilerStep*".
Times are loom's ns taken to us (floats), torch's unit.  Device work (kernels,
copies, fills) is a row of its own and adds its time to the op that launched
it: the host call a flow leads from, then the innermost op or range around
that call (torch attributes a kernel to its op through the correlation).
"""
import html as _html
import os
import re
import shutil
import socket
import tempfile
import time

# torch.autograd.profiler_util._filter_name: helper ops torch leaves out.
TORCH_FILTERED = frozenset([
    "[memory]", "[OutOfMemory]", "profiler::_record_function_enter",
    "profiler::_record_function_enter_new", "profiler::_record_function_exit",
    "aten::is_leaf", "aten::output_nr", "aten::_version"])

# Host events that are rows (torch's CPU FunctionEvents): ops, annotations
# and calls into device runtimes; device work of these kinds is a device row.
HOST_KINDS = frozenset(["cpu_op", "user_range", "runtime", "driver", "sync", "collective"])
DEVICE_KINDS = frozenset(["kernel", "memcpy", "memset", "collective"])

_TIME_KEYS = ("self_cpu_time_total", "cpu_time_total", "cpu_time", "count",
              "self_device_time_total", "device_time_total", "device_time")
_DEVICE_KEY = re.compile(r"^(self_)?([a-z0-9]+)_time(_total)?$")


def _format_time(us):
    """torch.autograd.profiler_util._format_time."""
    if us >= 1e6:
        return "%.3fs" % (us / 1e6)
    if us >= 1e3:
        return "%.3fms" % (us / 1e3)
    return "%.3fus" % us


def _format_share(us, total):
    if total == 0:
        return "NaN"
    return "%.2f%%" % (us * 100.0 / total)


class _Node:
    """One host or device event of the tree (torch's FunctionEvent)."""
    __slots__ = ("key", "start", "end", "shapes", "device", "children", "parent", "kernels",
                 "index", "kind")

    def __init__(self, key, start, end, device, index, kind):
        self.key, self.start, self.end, self.shapes = key, start, end, None
        self.device, self.index, self.kind = device, index, kind
        self.children, self.parent, self.kernels = [], None, 0.0

    @property
    def cpu_total(self):
        return 0.0 if self.device is not None else (self.end - self.start) / 1000.0

    @property
    def self_cpu(self):
        if self.device is not None:
            return 0.0
        return self.cpu_total - sum(c.cpu_total for c in self.children)

    def device_total(self):
        if self.device is not None:
            return (self.end - self.start) / 1000.0
        return self.kernels + sum(c.device_total() for c in self.children)


class FunctionEventAvg:
    """The statistics of one key (torch's FunctionEventAvg): times in us."""

    def __init__(self, key, input_shapes, device_type):
        self.key = key
        self.count = 0
        self.node_id = -1
        self.is_async = False
        self.is_remote = False
        self.is_legacy = False
        self.input_shapes = input_shapes
        self.stack = []
        self.device_type = device_type   # "cpu", or the device's type ("cuda", "opencl")
        self.cpu_time_total = 0.0
        self.self_cpu_time_total = 0.0
        self.device_time_total = 0.0
        self.self_device_time_total = 0.0
        self.flops = 0
        self.cpu_memory_usage = self.self_cpu_memory_usage = 0
        self.cuda_memory_usage = self.self_cuda_memory_usage = 0

    def _add(self, node):
        self.count += 1
        self.cpu_time_total += node.cpu_total
        self.self_cpu_time_total += node.self_cpu
        total = node.device_total()
        self.device_time_total += total
        self.self_device_time_total += total - sum(c.device_total() for c in node.children)

    @property
    def cpu_time(self):
        return 0.0 if self.count == 0 else self.cpu_time_total / self.count

    @property
    def device_time(self):
        return 0.0 if self.count == 0 else self.device_time_total / self.count

    # torch 1.x names of the device figures (any device: loom's device work).
    cuda_time_total = property(lambda s: s.device_time_total)
    self_cuda_time_total = property(lambda s: s.self_device_time_total)
    cuda_time = property(lambda s: s.device_time)

    def __getattr__(self, name):
        m = _DEVICE_KEY.match(name)
        if name.endswith("_str"):
            return _format_time(getattr(self, name[:-4]))
        if m and m.group(2) not in ("cpu", "device"):
            return getattr(self, (m.group(1) or "") + "device_time" + (m.group(3) or ""))
        raise AttributeError(name)

    def __repr__(self):
        return ("<FunctionEventAvg key=%s self_cpu_time=%s cpu_time=%s  self_device_time=%s "
                "device_time=%s input_shapes=%s count=%d>" % (
                    self.key, self.self_cpu_time_total_str, self.cpu_time_str,
                    self.self_device_time_total_str, self.device_time_str, self.input_shapes,
                    self.count))


def _sort_attr(sort_by):
    if sort_by is None:
        return None
    m = _DEVICE_KEY.match(sort_by)
    if sort_by in _TIME_KEYS or (m and m.group(2) != "cpu"):
        return sort_by
    raise ValueError("sort_by=%r: loom's averages sort by %s, or a device's time key "
                     "(self_cuda_time_total, cuda_time_total, cuda_time, ...)"
                     % (sort_by, ", ".join(_TIME_KEYS)))


class EventList(list):
    """key_averages()'s result: a list of FunctionEventAvg, with table()."""

    def __init__(self, items, device_label):
        super().__init__(items)
        self.device_label = device_label  # "CUDA", "OPENCL", ..., or None without device work

    def table(self, sort_by=None, row_limit=100, max_src_column_width=75,
              max_name_column_width=55, max_shapes_column_width=80, header=None,
              top_level_events_only=False):
        """torch.autograd.profiler_util.EventList.table's text (its columns,
        widths and formats); sort_by: any attribute torch sorts by whose
        figure loom has (_TIME_KEYS, and the device keys)."""
        return _build_table(self, _sort_attr(sort_by), header, row_limit,
                            max_name_column_width, max_shapes_column_width,
                            top_level_events_only)

    def __str__(self):
        return self.table()

    @property
    def self_cpu_time_total(self):
        return sum(e.self_cpu_time_total for e in self)


def _build_table(events, sort_by, header, row_limit, name_width_max, shapes_width_max,
                 top_level_only):
    """torch.autograd.profiler_util._build_table for loom's averages (no
    memory, flops or source columns: loom's averages have none)."""
    if not events:
        return ""
    dev = events.device_label if any(e.self_device_time_total > 0 for e in events) else None
    has_shapes = any(e.input_shapes for e in events)
    if sort_by is not None:
        events = sorted(events, key=lambda e: getattr(e, sort_by), reverse=True)
    name_w = max(len(e.key) for e in events) + 4
    if name_width_max is not None:
        name_w = min(name_w, name_width_max)
    shapes_w = max(len(str(e.input_shapes)) for e in events) + 4
    if shapes_width_max is not None:
        shapes_w = min(shapes_w, shapes_width_max)
    headers = ["Name", "Self CPU %", "Self CPU", "CPU total %", "CPU total", "CPU time avg"]
    if dev:
        headers += ["Self %s" % dev, "Self %s %%" % dev, "%s total" % dev, "%s time avg" % dev]
    headers.append("# of Calls")
    widths = [name_w] + [12] * (len(headers) - 1)
    if has_shapes:
        headers.append("Input Shapes")
        widths.append(shapes_w)
    row_format = "".join("{: >%d}  " % w for w in widths)
    header_sep = "".join("-" * w + "  " for w in widths)
    line_length = sum(w + 2 for w in widths) - 2
    self_cpu = sum(e.self_cpu_time_total for e in events)
    self_dev = sum(e.self_device_time_total for e in events if e.device_type != "cpu")
    out = []
    if header is not None:
        out += ["=" * line_length, header]
    if top_level_only:
        out += ["=" * line_length, "This report only display top-level ops statistics"]
    out += [header_sep, row_format.format(*headers), header_sep]
    shown = 0
    for e in events:
        if shown == row_limit:
            break
        if top_level_only and getattr(e, "_nested", False):
            continue
        shown += 1
        name = e.key
        if name_width_max is not None and len(name) >= name_width_max - 3:
            name = name[:name_width_max - 3] + "..."
        row = [name, _format_share(e.self_cpu_time_total, self_cpu),
               _format_time(e.self_cpu_time_total),
               _format_share(e.cpu_time_total, self_cpu), _format_time(e.cpu_time_total),
               _format_time(e.cpu_time)]
        if dev:
            row += [_format_time(e.self_device_time_total),
                    _format_share(e.self_device_time_total, self_dev),
                    _format_time(e.device_time_total), _format_time(e.device_time)]
        row.append(e.count)
        if has_shapes:
            row.append(str(e.input_shapes)[:shapes_w])
        out.append(row_format.format(*row))
    out += [header_sep, "Self CPU time total: %s" % _format_time(self_cpu)]
    if dev:
        out.append("Self %s time total: %s" % (dev, _format_time(self_dev)))
    return "".join(s + "\n" for s in out)


# ---- building the tree ---------------------------------------------------------
def _parse_shapes(text):
    if text is None:
        return []
    if isinstance(text, str):
        import json
        try:
            return json.loads(text)
        except ValueError:
            return text
    return text


def _nest(nodes):
    """torch's _populate_cpu_children over one thread's nodes."""
    nodes.sort(key=lambda n: (n.start, -n.end))
    stack = []
    for n in nodes:
        while stack:
            top = stack[-1]
            if n.start >= top.end or n.end > top.end:
                stack.pop()
            else:
                top.children.append(n)
                n.parent = top
                break
        stack.append(n)


def _fold_duplicates(nodes):
    """torch's _remove_dup_nodes: a node with its parent's name that is its
    parent's only child is folded into the parent.  Returns the nodes kept."""
    while True:
        gone = set()
        for n in nodes:
            p = n.parent
            if p is not None and p.key == n.key and len(p.children) == 1:
                p.children = n.children
                p.kernels += n.kernels
                for c in n.children:
                    c.parent = p
                gone.add(id(n))
        if not gone:
            return nodes
        nodes = [n for n in nodes if id(n) not in gone]


def _host_key(name):
    return "ProfilerStep*" if name.startswith("ProfilerStep#") else name


def _device_kind(d):
    """A device's type as torch names it: loom's device type, upper case; a
    Kineto trace's GPUs (no type, an NVIDIA or AMD name): CUDA, torch's
    name for both."""
    t = d.get("device_type") or ""
    if not t and (d.get("name") or "").startswith(("NVIDIA", "AMD")):
        t = "cuda"
    return t.upper() or "DEVICE"


def _device_label(trace, pids):
    """The device columns' word ("Self CUDA"): one type, else Device."""
    if not pids:
        return None
    kinds = {_device_kind(d) for d in trace.devices if d["pid"] in pids}
    return kinds.pop() if len(kinds) == 1 and "DEVICE" not in kinds else "Device"


def key_averages(trace, group_by_input_shape=False):
    """The per-key statistics of a trace (an EventList of FunctionEventAvg),
    grouped by name, and by input shapes when asked."""
    events = trace._t._events(0, -1)
    host, device, dev_types = {}, [], set()
    for i, e in enumerate(events):
        name, kind, ph = e[0], e[2], e[3]
        if ph != "X" or name is None:
            continue
        if e[10] is None and kind in HOST_KINDS and name not in TORCH_FILTERED:
            n = _Node(_host_key(name), e[4], e[4] + e[5], None, i, kind)
            host.setdefault((e[6], e[7]), []).append(n)
        elif e[10] is not None and kind in DEVICE_KINDS:
            device.append(_Node(name, e[4], e[4] + e[5], e[6], i, kind))
            dev_types.add(e[6])
    by_index = {}
    for nodes in host.values():
        _nest(nodes)
        for n in nodes:
            by_index[n.index] = n
    if group_by_input_shape:
        idx = sorted(by_index)
        for i, a in zip(idx, trace._t._args(idx)):
            by_index[i].shapes = _parse_shapes(a.get("Input Dims"))
    _attribute_device(trace, device, by_index)
    kept = []
    for nodes in host.values():
        kept += _fold_duplicates(nodes)
    kept.sort(key=lambda n: (n.start, -n.end))
    label = _device_label(trace, dev_types)
    names = {d["pid"]: _device_kind(d).lower() for d in trace.devices}
    stats = {}
    for n in kept + device:
        shapes = n.shapes if group_by_input_shape and n.shapes is not None else []
        k = (n.key, n.device is not None, str(shapes) if group_by_input_shape else "")
        if k not in stats:
            dtype = "cpu" if n.device is None else names.get(n.device, "device")
            stats[k] = FunctionEventAvg(n.key, shapes if group_by_input_shape else "", dtype)
            stats[k]._nested = n.parent is not None
        stats[k]._add(n)
    return EventList(stats.values(), label)


def _attribute_device(trace, device, by_index):
    """Adds each device event's time to the op or range around the host call
    that launched it (the flow's source)."""
    if not device:
        return
    launch = {}
    for src, dst in trace.flows():
        launch[dst] = src
    for d in device:
        src = launch.get(d.index)
        owner = by_index.get(src) if src is not None else None
        while owner is not None and owner.kind not in ("cpu_op", "user_range"):
            owner = owner.parent  # the runtime call's op (torch: none, no op)
        if owner is not None:
            owner.kernels += (d.end - d.start) / 1000.0


# ---- stacks ----------------------------------------------------------------------
_FRAME_ESCAPE = str.maketrans(";\t\n\r", "____")


def _frame_name(line):
    parts = line.split("\t")
    func = parts[0]
    if func:
        return func.translate(_FRAME_ESCAPE)
    mod = os.path.basename(parts[1]) if len(parts) > 1 else "?"
    off = parts[2] if len(parts) > 2 else "0x0"
    return ("%s+%s" % (mod, off)).translate(_FRAME_ESCAPE)


STACK_METRICS = ("self_cpu_time_total", "samples")


def collapsed_stacks(trace, metric="self_cpu_time_total"):
    """{"outer;...;leaf": count} from the trace's CPU samples (kind
    "sample", their "stack" argument).  metric "samples": the number of
    samples with that stack; "self_cpu_time_total": those samples' CPU time
    in us, samples x the sampling period (1e6 / perf.frequency_hz): the time
    the stack's leaf ran, torch's unit for this metric."""
    if metric not in STACK_METRICS:
        raise ValueError("metric=%r: export_stacks writes CPU samples: one of %s (device "
                         "time has no call stacks in loom's samples)"
                         % (metric, ", ".join(STACK_METRICS)))
    idx = [i for i, e in enumerate(trace._t._events(0, -1)) if e[2] == "sample"]
    per = 1
    if metric == "self_cpu_time_total":
        hz = float(trace._t._meta().get("perf.frequency_hz") or 0)
        if hz <= 0:
            raise ValueError("export_stacks: the trace says no sampling frequency "
                             "(perf.frequency_hz), so samples cannot be turned into time; "
                             "use metric='samples'")
        per = 1e6 / hz
    counts = {}
    for a in trace._t._args(idx):
        stack = a.get("stack")
        if not stack:
            continue
        frames = [_frame_name(f) for f in stack.split("\n") if f]
        key = ";".join(reversed(frames))
        counts[key] = counts.get(key, 0) + 1
    if per != 1:
        return {k: int(round(v * per)) for k, v in counts.items()}
    return counts


def export_stacks(trace, path, metric="self_cpu_time_total"):
    """Writes the collapsed stacks ("frame;frame;...;leaf COUNT" lines,
    outermost frame first) that flamegraph.pl, inferno and speedscope read."""
    stacks = collapsed_stacks(trace, metric)
    with open(os.fspath(path), "w", encoding="utf-8") as f:
        for k in sorted(stacks):
            f.write("%s %d\n" % (k, stacks[k]))
    return path


# ---- files -----------------------------------------------------------------------
_SUFFIXES = (".json", ".json.gz", ".pftrace", ".pftrace.gz")


def export_chrome_trace(trace, path):
    """Saves the trace: Chrome JSON, gzipped when the name ends in .gz,
    .pftrace by its suffix; any other name gets JSON (as torch writes)."""
    path = os.fspath(path)
    if path.endswith(_SUFFIXES):
        trace.save(path)
        return path
    gz = path.endswith(".gz")
    d = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(suffix=".json.gz" if gz else ".json", dir=d, prefix=".loom-")
    os.close(fd)
    try:
        trace.save(tmp)
        shutil.move(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return path


TB_PATTERN = re.compile(r"^(?P<worker>.+)\.(?P<ms>\d+)\.pt\.trace\.json(\.gz)?$")


def tensorboard_trace_handler(dir_name, worker_name=None, use_gzip=False):
    """torch.profiler.tensorboard_trace_handler for loom's windows: each
    window's trace goes to dir_name/{worker_name}.{time in ms}.pt.trace.json
    (.gz with use_gzip), worker_name defaulting to {hostname}_{pid}, the
    names TensorBoard's profiler plugin and HTA list.  Two windows ending in
    the same millisecond get consecutive numbers, so none is overwritten."""
    last = [0]

    def handler(trace):
        nonlocal worker_name
        os.makedirs(dir_name, exist_ok=True)
        if not worker_name:
            worker_name = "%s_%d" % (socket.gethostname(), os.getpid())
        ms = max(int(time.time() * 1000), last[0] + 1)
        last[0] = ms
        name = "%s.%d.pt.trace.json%s" % (worker_name, ms, ".gz" if use_gzip else "")
        path = os.path.join(dir_name, name)
        trace.save(path)
        trace.path = path
    return handler


def repr_html(trace):
    """The trace's `loom report --html` page inside an iframe's srcdoc: the
    page keeps its own styles and scripts, and the notebook's stay as they
    are."""
    fd, tmp = tempfile.mkstemp(suffix=".html", prefix="loom-py-")
    os.close(fd)
    try:
        trace.html(tmp)
        with open(tmp, encoding="utf-8") as f:
            page = f.read()
    finally:
        os.unlink(tmp)
    return ('<iframe srcdoc="%s" style="width:100%%;height:720px;border:1px solid #ccc" '
            'sandbox="allow-scripts"></iframe>' % _html.escape(page, quote=True))
