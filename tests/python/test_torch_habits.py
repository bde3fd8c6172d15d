"""torch.profiler's habits on loom's profile (python/loom/_habits.py):
key_averages().table() against torch.profiler's on the same training loop
in the same run, export_chrome_trace, export_stacks, the TensorBoard file
names, _repr_html_."""
import collections
import gzip
import html
import json
import os
import re
import socket
import sys

import pytest

import loom
from conftest import TESTS

# The TensorBoard profiler plugin's pattern of the files it lists
# (kineto tb_plugin/torch_tb_profiler/consts.py): worker, optional span.
TB_WORKER = re.compile(r"""^(.*?)(\.\d+)?\.pt\.trace\.json(?:\.gz)?$""")


def _torch_model():
    """tests/integrations/torch_model.py's model and work(), without its
    command line."""
    torch = pytest.importorskip("torch")
    src = open(os.path.join(TESTS, "integrations", "torch_model.py")).read()
    ns = {"__name__": "torch_model", "sys": sys}
    exec(compile(src.split("\nif len(sys.argv)")[0], "torch_model.py", "exec"), ns)
    return torch, ns["work"]


def _rows(table):
    """(name, # of Calls, Input Shapes or None) of a printed table's rows."""
    lines = table.splitlines()
    head = lines[1]
    calls_end = head.index("# of Calls") + len("# of Calls")
    rows = []
    for line in lines[3:]:
        if line.startswith("---"):
            break
        rows.append((line[:55].strip(), int(line[calls_end - 12:calls_end]),
                     line[calls_end:].strip() or None))
    return head, collections.Counter(rows)


def _foreign(p):
    """Names of ranges loom saw that torch.profiler does not record: other
    annotation APIs' (oneDNN's ITT tasks, category = the ITT domain)."""
    return {e.name for e in p.trace.events()
            if e.kind == "user_range" and e.cat != "user_annotation"}


def _torch_rows(p, rows):
    foreign = _foreign(p)
    return collections.Counter({r: n for r, n in rows.items() if r[0] not in foreign})


def _us_boundary_orphans(tp):
    """Keys whose first event in torch.profiler's list (the one that decides
    whether torch's table shows the key as top-level) has no parent only
    because it starts at the microsecond an event of its thread ends in and
    lasts at most a microsecond."""
    first = {}
    for e in tp.events():
        first.setdefault(e.key, e)
    out = set()
    for k, e in first.items():
        r = e.time_range
        if e.cpu_parent is None and any(
                o is not e and o.thread == e.thread and o.time_range.start < r.start
                and o.time_range.end == r.start and r.end <= r.start + 1
                for o in tp.events()):
            out.add(k)
    return out


@pytest.fixture(scope="module")
def both():
    """One run of the training loop recorded by loom and torch.profiler at once."""
    torch, work = _torch_model()
    work()  # warm: first-call work stays out of both
    with loom.profile(devices=["cpu"], torch_ops=True) as p:
        with torch.profiler.profile(record_shapes=True) as tp:
            work()
    return p, tp


def test_table_has_torch_names_and_counts(both):
    p, tp = both
    for group in (False, True):
        for sort_by in ("self_cpu_time_total", "cpu_time_total", "count"):
            mine = p.key_averages(group_by_input_shape=group).table(sort_by=sort_by,
                                                                    row_limit=1000)
            ref = tp.key_averages(group_by_input_shape=group).table(sort_by=sort_by,
                                                                    row_limit=1000)
            mh, mrows = _rows(mine)
            rh, rrows = _rows(ref)
            assert mh == rh  # the same columns, in the same widths
            mrows = _torch_rows(p, mrows)
            assert mrows == rrows, (mrows - rrows, rrows - mrows)
            assert mine.splitlines()[-1].startswith("Self CPU time total: ")
    top = dict(sort_by="count", row_limit=1000, top_level_events_only=True, header="H")
    mine, ref = p.key_averages().table(**top), tp.key_averages().table(**top)
    assert mine.splitlines()[:4] == ref.splitlines()[:4]  # "=", H, "=", the top-level line
    mh, mrows = _rows("\n".join(mine.splitlines()[4:]))
    rh, rrows = _rows("\n".join(ref.splitlines()[4:]))
    assert mh == rh
    # torch keeps whole microseconds: an op ending in the microsecond its
    # parent ends in may start "at" the parent's end and lose its parent
    # there; loom's nanoseconds nest it.  Only such rows may differ.
    ties = _us_boundary_orphans(tp)
    assert not mrows - rrows
    assert {r[0] for r in rrows - mrows} <= ties, (rrows - mrows, ties)
    assert ("workload", 1, None) in mrows and ("train_step", 3, None) not in mrows
    avgs = p.key_averages()
    counts = {e.key: e.count for e in avgs if e.key not in _foreign(p)}
    assert counts == {e.key: e.count for e in tp.key_averages()}
    assert counts["train_step"] == 3 and counts["aten::empty"] > 0


def test_sort_keys_and_row_limit(both):
    p, _ = both
    avgs = p.key_averages()
    for key in ("self_cpu_time_total", "cpu_time_total", "count", "cpu_time"):
        rows = p.key_averages().table(sort_by=key, row_limit=5).splitlines()[3:8]
        want = sorted(avgs, key=lambda e: getattr(e, key), reverse=True)[:5]
        assert [r[:55].strip() for r in rows] == [e.key[:52] + "..." if len(e.key) >= 52
                                                  else e.key for e in want]
    # device keys sort (no device work here: every device figure is 0)
    assert p.key_averages().table(sort_by="self_cuda_time_total", row_limit=3)
    with pytest.raises(ValueError, match="sort_by"):
        avgs.table(sort_by="no_such_key")


def test_averages_have_torch_attributes(both):
    p, tp = both
    mine = {e.key: e for e in p.key_averages()}
    ref = {e.key: e for e in tp.key_averages()}
    step = mine["train_step"]
    assert step.cpu_time == pytest.approx(step.cpu_time_total / 3)
    assert 0 < step.self_cpu_time_total < step.cpu_time_total
    assert step.self_cuda_time_total == 0 and step.cuda_time_total == 0
    assert step.input_shapes == ref["train_step"].input_shapes == ""
    assert step.cpu_time_total_str.endswith(("us", "ms", "s"))
    shaped = {(e.key, str(e.input_shapes)): e.count
              for e in p.key_averages(group_by_input_shape=True) if e.key not in _foreign(p)}
    assert shaped == {(e.key, str(e.input_shapes)): e.count
                      for e in tp.key_averages(group_by_input_shape=True)}
    # The self times add up to the whole of the top-level events: "workload"
    # and an aten::zeros the profiler's start makes before it.
    self_sum = sum(e.self_cpu_time_total for e in mine.values())
    top = mine["workload"].cpu_time_total
    assert top < self_sum <= top + mine["aten::zeros"].cpu_time_total + 1e-6


def test_device_columns_from_device_work():
    """Kernels (a Kineto trace of a CUDA run) are rows of their own, and their
    time is the Self/total device time of the op around their launch."""
    t = loom.load(os.path.join(TESTS, "data", "kineto", "hta_gpu_simple_add.json.gz"))
    avgs = t.key_averages()
    kernels = [e for e in t.events() if e.kind == "kernel"]
    table = avgs.table(sort_by="self_cuda_time_total", row_limit=1000)
    head = table.splitlines()[1]
    for col in ("Self CUDA", "Self CUDA %", "CUDA total", "CUDA time avg"):
        assert col in head
    dev_rows = [e for e in avgs if e.device_type != "cpu"]
    assert sum(e.count for e in dev_rows if e.key in {k.name for k in kernels}) == len(kernels)
    total = sum(k.dur_ns for k in kernels) / 1000.0
    assert sum(e.self_device_time_total for e in dev_rows
               if e.key in {k.name for k in kernels}) == pytest.approx(total)
    # every kernel launched from an op gives its time to that op
    ops = sum(e.self_device_time_total for e in avgs if e.device_type == "cpu")
    assert 0 < ops <= sum(e.self_device_time_total for e in dev_rows) + 1e-6
    assert table.splitlines()[-1].startswith("Self CUDA time total: ")


@pytest.mark.parametrize("name", ["t.json", "t.json.gz", "t.pftrace", "t.trace"])
def test_export_chrome_trace_loads_back(both, tmp_path, name):
    p, _ = both
    path = str(tmp_path / name)
    assert p.export_chrome_trace(path) == path
    back = loom.load(path)
    assert len(back) == len(p.trace)
    want = collections.Counter(e.kind for e in p.trace.events())
    assert collections.Counter(e.kind for e in back.events()) == want
    if name.endswith(".pftrace"):
        return
    opener = gzip.open if name.endswith(".gz") else open
    with opener(path, "rt") as f:
        doc = json.load(f)
    ops = sum(1 for e in doc["traceEvents"] if e.get("cat") == "cpu_op" and e.get("ph") == "X")
    assert ops == want["cpu_op"]


def _sampled(work):
    if not any(b["name"] == "perf" and b["state"] == "available" for b in loom.backends()):
        pytest.skip("perf backend unavailable here (perf_event_open)")
    with loom.profile(devices=["cpu", "perf"], options={"perf.frequency": 2000},
                      torch_ops=True) as p:
        work()
        work()
    return p


def test_export_stacks_from_cpu_samples(tmp_path):
    _, work = _torch_model()
    p = _sampled(work)
    samples = [e for e in p.trace.events() if e.kind == "sample"]
    assert samples
    path = str(tmp_path / "stacks.txt")
    p.export_stacks(path, "samples")
    leaves, total, depth = collections.Counter(), 0, 0
    with open(path) as f:
        for line in f:
            m = re.match(r"^(\S.*) (\d+)$", line.rstrip("\n"))
            assert m, line
            frames = m.group(1).split(";")
            assert all(frames)
            depth = max(depth, len(frames))
            leaves[frames[-1]] += int(m.group(2))
            total += int(m.group(2))
    assert total == len(samples) and depth > 5  # unwound through the interpreter
    # each sample's leaf frame is the sample's name (a function, or module+offset)
    assert leaves == collections.Counter(e.name.replace(";", "_") for e in samples)
    us = str(tmp_path / "us.txt")
    p.export_stacks(us)  # torch's default metric: self_cpu_time_total, in us
    with open(us) as f:
        got = sum(int(line.rsplit(" ", 1)[1]) for line in f)
    assert got == len(samples) * 500  # 2000 Hz: 500 us a sample
    with pytest.raises(ValueError, match="metric"):
        p.export_stacks(us, "self_cuda_time_total")


def _windows(handler, steps=4):
    with loom.profile(schedule=loom.schedule(active=1, repeat=steps),
                      on_trace_ready=handler) as p:
        for _ in range(steps):
            with loom.range("step body"):
                pass
            p.step()
    return p


@pytest.mark.parametrize("gz", [False, True])
def test_tensorboard_file_names(tmp_path, gz):
    torch = pytest.importorskip("torch")
    d = str(tmp_path / "tb")
    _windows(loom.tensorboard_trace_handler(d, use_gzip=gz))
    names = sorted(os.listdir(d))
    assert len(names) == 4
    worker = "%s_%d" % (socket.gethostname(), os.getpid())
    # torch's own handler's name, from a stand-in profile object
    made = []
    torch.profiler.tensorboard_trace_handler(str(tmp_path / "torch"), use_gzip=gz)(
        type("P", (), {"export_chrome_trace": lambda self, path: made.append(path)})())
    tname = os.path.basename(made[0])
    tm = TB_WORKER.match(tname)
    for n in names:
        m = TB_WORKER.match(n)
        assert m and m.group(1) == worker == tm.group(1)
        assert len(m.group(2)) == len(tm.group(2))  # ms since the epoch, as torch's
        assert n.endswith(".pt.trace.json.gz" if gz else ".pt.trace.json")
        assert len(loom.load(os.path.join(d, n))) > 0
    assert len({TB_WORKER.match(n).group(2) for n in names}) == 4  # none overwritten


def test_torch_handler_takes_loom_windows(tmp_path):
    """torch.profiler.tensorboard_trace_handler itself as on_trace_ready: it
    calls export_chrome_trace on what it is given, which a loom.Trace has."""
    torch = pytest.importorskip("torch")
    d = str(tmp_path / "tb")
    _windows(torch.profiler.tensorboard_trace_handler(d, worker_name="w"), steps=1)
    (name,) = os.listdir(d)
    assert TB_WORKER.match(name).group(1) == "w"
    names = collections.Counter(e.name for e in loom.load(os.path.join(d, name)).events())
    assert names["step body"] == 1 and names["ProfilerStep#0"] == 1


def test_tensorboard_directory_loads_in_hta(tmp_path):
    """HTA lists the directory and parses the traces (LOOM_HTA_SRC: its
    source tree; skipped without it)."""
    src = os.environ.get("LOOM_HTA_SRC")
    if not src:
        pytest.skip("LOOM_HTA_SRC not set (HolisticTraceAnalysis's source tree)")
    sys.path.insert(0, src)
    from hta.common.trace import Trace  # TraceAnalysis's parser (no plotly needed)
    d = str(tmp_path / "tb")
    _windows(loom.tensorboard_trace_handler(d, use_gzip=True), steps=1)
    (name,) = os.listdir(d)
    t = Trace(trace_dir=d)
    assert t.trace_files == {0: os.path.join(d, name)}
    t.parse_traces()
    df = t.get_trace(0)
    names = df["name"].map(lambda i: t.symbol_table.sym_table[i])
    assert int((names == "step body").sum()) == 1


def test_repr_html_is_the_report_page(both, tmp_path):
    p, _ = both
    saved = str(tmp_path / "t.pftrace")
    p.trace.save(saved)
    t = loom.load(saved)
    page = str(tmp_path / "r.html")
    t.html(page)
    frame = t._repr_html_()
    m = re.match(r'^<iframe srcdoc="([^"]*)"', frame)
    assert m
    with open(page, encoding="utf-8") as f:
        assert html.unescape(m.group(1)) == f.read()
    assert html.unescape(re.match(r'^<iframe srcdoc="([^"]*)"',
                                  p._repr_html_()).group(1)).lower().startswith("<!doctype html")


def test_device_columns_of_a_loom_recording(tmp_path):
    """loom's own device work (OpenCL on POCL, tests/python/workload.py's):
    the kernels and copies are OPENCL rows, and their time is the device time
    of the range around the calls that enqueued them (flows: loom's
    correlation of each command with its call)."""
    import workload  # libOpenCL through ctypes (its layer set by `import loom`)
    with loom.profile(devices=["cpu", "opencl"]) as p:
        with loom.range("workload"):
            workload.opencl()
    out = str(tmp_path / "w.pftrace")
    p.export_chrome_trace(out)
    t = loom.load(out)
    dev = [e for e in t.events() if e.kind in ("kernel", "memcpy")]
    assert len(dev) == 8
    avgs = {e.key: e for e in t.key_averages()}
    assert avgs["scale"].count == 6 and avgs["scale"].device_type == "opencl"
    total = sum(e.dur_ns for e in dev) / 1000.0
    w = avgs["workload"]
    assert w.self_device_time_total == pytest.approx(total)
    assert w.device_time_total == w.cuda_time_total == pytest.approx(total)
    assert avgs["scale"].self_device_time_total == pytest.approx(
        sum(e.dur_ns for e in dev if e.name == "scale") / 1000.0)
    table = t.key_averages().table(sort_by="self_opencl_time_total", row_limit=3)
    lines = table.splitlines()
    assert "Self OPENCL" in lines[1] and "OPENCL time avg" in lines[1]
    assert lines[3].split()[0] == "workload"  # sorted by its device time
    assert lines[-1] == "Self OPENCL time total: %.3fms" % (total / 1000.0) or \
        lines[-1] == "Self OPENCL time total: %.3fus" % total
