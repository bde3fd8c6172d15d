"""p.trace.memory(): one row per memory event with loom's figures, on the
trace of tests/test_memory_analysis.c worked out by hand (times in us after
BASE): device 0's pool peaks at 550 B at 1150 us in aten::relu (range bwd,
ProfilerStep#2); the free at 1250 us of 0x9999 was never allocated; host
memory on thread 2 starts with 64 B live at the window's start."""
import json

import pytest

import loom

BASE = 1700000000000000  # us


def ev_range(name, cat, s, e, tid=1):
    return {"ph": "X", "cat": cat, "name": name, "pid": 4242, "tid": tid, "ts": BASE + s,
            "dur": e - s}


def ev_mem(ts, nbytes, addr, device=None, kind=None, reserved=None, at_start=False, tid=1):
    args = {"loom_role": "free" if nbytes < 0 else "alloc", "addr": addr}
    if nbytes != -1:
        args["bytes"] = abs(nbytes)
    if device is not None:
        args["device"] = device
    if kind:
        args["memory_kind"] = kind
    if reserved is not None:
        args["reserved"] = reserved
    if at_start:
        args["live_at_start"] = 1
    return {"ph": "i", "s": "t", "cat": "memory", "name": "free" if nbytes < 0 else "alloc",
            "pid": 4242, "tid": tid, "ts": BASE + ts, "args": args}


@pytest.fixture
def trace_path(tmp_path):
    evs = [ev_range("ProfilerStep#1", "user_annotation", 0, 1000),
           ev_range("ProfilerStep#2", "user_annotation", 1000, 2000),
           ev_range("fwd", "user_annotation", 100, 900),
           ev_range("aten::empty", "cpu_op", 110, 200),
           ev_range("aten::mm", "cpu_op", 300, 500),
           ev_range("bwd", "user_annotation", 1050, 1900),
           ev_range("aten::relu", "cpu_op", 1100, 1300)]
    pool = dict(device=0, kind="pool")
    evs += [ev_mem(120, 100, 0x1000, reserved=1024, **pool),
            ev_mem(310, 300, 0x2000, reserved=1024, **pool),
            ev_mem(320, 50, 0x3000, reserved=1024, **pool),
            ev_mem(400, -100, 0x1000, reserved=1024, **pool),
            ev_mem(1150, 200, 0x4000, reserved=2048, **pool),
            ev_mem(1200, -300, 0x2000, reserved=2048, **pool),
            ev_mem(1250, -77, 0x9999, reserved=2048, **pool),
            ev_mem(50, 64, 0x10, at_start=True, tid=2),
            ev_mem(600, 36, 0x20, tid=2),
            ev_mem(700, -1, 0x10, tid=2)]
    meta = [{"ph": "M", "name": "process_name", "pid": 0, "args": {"name": "GPU 0"}}]
    p = tmp_path / "mem.json"
    p.write_text(json.dumps({"traceEvents": meta + evs}))
    return str(p)


def test_memory_dataframe(trace_path):
    df = loom.load(trace_path).memory()
    assert len(df) == 10
    assert list(df.ts_ns) == sorted(df.ts_ns)
    assert list(df.allocated) == [64, 100, 400, 450, 350, 100, 36, 550, 250, 250]
    assert list(df.bytes) == [64, 100, 300, 50, -100, 36, -64, 200, -300, -77]
    assert list(df.action) == ["alloc"] * 4 + ["free", "alloc", "free", "alloc", "free", "free"]
    dev = df[df.device == 0]
    assert set(dev.kind) == {"pool"}
    assert list(dev.reserved) == [1024, 1024, 1024, 1024, 2048, 2048, 2048]
    peak = dev.loc[dev.allocated.idxmax()]
    assert (peak.allocated, peak.ts, peak.op, peak.range, peak.step, peak.addr) == \
        (550, BASE + 1150.0, "aten::relu", "bwd", "ProfilerStep#2", 0x4000)
    f1 = dev[dev.addr == 0x1000].iloc[1]
    assert (f1.is_free, f1.op, f1.alloc_op, f1.bytes) == (True, "aten::mm", "aten::empty", -100)
    unknown = df[df.unknown_free]
    assert list(unknown.addr) == [0x9999] and list(unknown.bytes) == [-77]
    host = df[df.device == -1]
    assert set(host.kind) == {"host"} and list(host.tid) == [2, 2, 2]
    assert list(host.live_at_start) == [True, False, False]
    assert host.op.isna().all() and list(host.step) == ["ProfilerStep#1"] * 3
    assert list(df.ts) == [v / 1000.0 for v in df.ts_ns]


def test_memory_empty_dataframe():
    t = loom.load(__file__.replace("python/test_trace_memory.py", "data/kineto/") +
                  "libkineto_unit_test_trace.json")
    df = t.memory()
    assert len(df) == 0 and list(df.columns) == loom.MEMORY_COLUMNS


def test_report_memory_section(trace_path):
    r = loom.load(trace_path).report()
    dev = [s for s in r["memory"]["series"] if s["device"] == "GPU 0"][0]
    assert (dev["peak_bytes"], dev["peak_ns"], dev["peak_op"], dev["peak_step"]) == \
        (550, 1150000, "aten::relu", "ProfilerStep#2")
    assert (dev["leaks"], dev["leaked_bytes"], dev["unknown_frees"]) == (2, 250, 1)


PYTORCH_TRAIN = __file__.replace("python/test_trace_memory.py", "data/memory/pytorch_train.json")


def test_memory_dataframe_of_pytorch_trace():
    """The same trace as PyTorch writes it (Kineto's [memory] instants): the
    same rows, PyTorch's host block at 50 us an allocation of the profile."""
    df = loom.load(PYTORCH_TRAIN).memory()
    assert len(df) == 10
    assert list(df.allocated) == [64, 100, 400, 450, 350, 100, 36, 550, 250, 250]
    assert list(df.bytes) == [64, 100, 300, 50, -100, 36, -64, 200, -300, -77]
    dev = df[df.device == 0]
    assert set(dev.kind) == {"pool"}
    assert list(dev.reserved) == [1024, 1024, 1024, 1024, 2048, 2048, 2048]
    peak = dev.loc[dev.allocated.idxmax()]
    assert (peak.allocated, peak.op, peak.range, peak.step) == \
        (550, "aten::relu", "bwd", "ProfilerStep#2")
    assert list(df[df.unknown_free].addr) == [0x9999]
    assert not df.live_at_start.any()
    assert set(df[df.device == -1].kind) == {"host"}
