"""Sessions through the API: the same records as `loom record` of the same
script, schedules with torch.profiler's meaning, annotations."""
import collections
import json
import os
import subprocess
import sys
import threading
import time

import pytest

import loom
from conftest import HERE, LOOM, TP_ERRORS, tp_query

WORKLOAD = os.path.join(HERE, "workload.py")


def by_cat(trace):
    return collections.Counter(e.cat for e in trace.events())


def test_api_records_what_loom_record_records(tmp_path):
    api, rec = str(tmp_path / "api.json"), str(tmp_path / "rec.json")
    a = subprocess.run([sys.executable, WORKLOAD, "api", api], capture_output=True, text=True,
                       timeout=300)
    assert a.returncode == 0, a.stderr
    r = subprocess.run([LOOM, "record", "-o", rec, "--", sys.executable, WORKLOAD, "plain"],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert a.stdout.split()[-1] == r.stdout.split()[-1]  # same checksum
    ta, tr = loom.load(api), loom.load(rec)
    ca, cr = by_cat(ta), by_cat(tr)
    assert ca == cr, (ca, cr)
    # what the script did: 6 kernels, a write and a read, 3 train steps of ops
    assert ca["kernel"] == 6 and ca["gpu_memcpy"] == 2
    assert ca["cpu_op"] > 100
    names = collections.Counter(e.name for e in ta.events() if e.cat == "user_annotation")
    assert names["workload"] == 1 and names["train_step"] == 3
    assert len(ta.flows()) == len(tr.flows()) == 8  # each device command to its call
    assert [d["device_type"] for d in ta.devices] == ["opencl"]
    assert ta.warnings == [] and ta.dropped == 0
    res = tp_query(api, "select count(*) as n from slice where category = 'kernel'",
                   "select count(*) as n from slice where category = 'cpu_op'", TP_ERRORS)
    assert res[0][0]["n"] == 6 and res[1][0]["n"] == ca["cpu_op"] and res[2] == []


def steps_of(trace):
    return sorted(e.name for e in trace.events() if e.name.startswith("ProfilerStep#"))


def test_schedule_gives_exactly_the_requested_steps(tmp_path):
    kept, seen = [], []

    def ready(trace):
        seen.append((trace.window, steps_of(trace)))
        kept.append(trace)  # kept past the callback: it gets its own copy

    sched = loom.schedule(wait=1, warmup=1, active=2, repeat=2)
    with loom.profile(schedule=sched, on_trace_ready=ready) as p:
        for i in range(12):
            with loom.range("work%d" % i):
                pass
            p.step()
    assert p.trace is None and p.windows == 2
    assert seen == [(1, ["ProfilerStep#2", "ProfilerStep#3"]),
                    (2, ["ProfilerStep#6", "ProfilerStep#7"])]
    assert [steps_of(t) for t in kept] == [s for _, s in seen]
    work = sorted(e.name for e in kept[1].events() if e.name.startswith("work"))
    assert work == ["work6", "work7"]


def test_trace_handler_writes_one_file_per_window(tmp_path):
    d = str(tmp_path / "windows")
    with loom.profile(schedule=loom.schedule(wait=0, warmup=0, active=3, repeat=3),
                      on_trace_ready=loom.trace_handler(d, worker_name="w")) as p:
        for _ in range(10):
            loom.mark("tick")
            p.step()
    files = sorted(os.listdir(d))
    assert files == ["w.1.json", "w.2.json", "w.3.json"]
    for i, f in enumerate(files):
        t = loom.load(os.path.join(d, f))
        assert steps_of(t) == ["ProfilerStep#%d" % (3 * i + k) for k in range(3)]
        assert sum(1 for e in t.events() if e.name == "tick") == 3


def test_annotations_land_in_the_trace(tmp_path):
    @loom.range("decorated")
    def f(x):
        return x + 1

    def worker():
        loom.thread_name("my worker")
        with loom.range("in thread"):
            pass

    with loom.profile(kinds=["user_range", "instant", "counter"]) as p:
        with loom.range("outer"):
            assert f(1) == 2
            loom.push("pushed")
            loom.pop()
            loom.mark("here")
            loom.counter("depth", 3.5)
        th = threading.Thread(target=worker)
        th.start()
        th.join()
    ev = list(p.trace.events())
    names = collections.Counter((e.name, e.kind) for e in ev)
    assert names == {("outer", "user_range"): 1, ("decorated", "user_range"): 1,
                     ("pushed", "user_range"): 1, ("here", "instant"): 1,
                     ("depth", "counter"): 1, ("in thread", "user_range"): 1}
    outer = next(e for e in ev if e.name == "outer")
    dec = next(e for e in ev if e.name == "decorated")
    assert outer.ts_ns <= dec.ts_ns and dec.ts_ns + dec.dur_ns <= outer.ts_ns + outer.dur_ns
    other = next(e for e in ev if e.name == "in thread")
    assert other.tid != outer.tid
    path = str(tmp_path / "t.json")
    p.trace.save(path)
    res = tp_query(path, "select t.name as n from thread t join thread_track k using(utid) "
                   "join slice s on s.track_id = k.id where s.name = 'in thread'", TP_ERRORS)
    assert "my worker" in res[0][0]["n"] and res[1] == []


def test_kinds_filter_and_start_stop_methods():
    p = loom.profile(kinds=["instant"])
    p.start()
    with loom.range("dropped by kinds"):
        loom.mark("kept")
    t = p.stop()
    assert [(e.name, e.kind) for e in t.events()] == [("kept", "instant")]
    assert p.trace is t


def test_long_calls_release_the_gil(tmp_path):
    with loom.profile() as p:
        for _ in range(200000):
            loom.push("r")
            loom.pop()
    path = str(tmp_path / "big.json")
    th = threading.Thread(target=p.trace.save, args=(path,))
    spins = 0
    th.start()
    while th.is_alive():  # runs only while save() has let go of the GIL
        spins += 1
    th.join()
    assert os.path.getsize(path) > 1000000
    assert spins > 1000, spins


def test_time_window_is_delivered_from_the_timer_thread():
    got = []

    def ready(trace):
        got.append((threading.current_thread() is threading.main_thread(),
                    [e.name for e in trace.events()]))

    with loom.profile(options={"duration": 0.3}, on_trace_ready=ready) as p:
        loom.mark("inside")
        deadline = time.monotonic() + 60
        while not got and time.monotonic() < deadline:
            time.sleep(0.01)  # the GIL is free: the timer thread takes it
        loom.mark("after the window")
    assert got == [(False, ["inside"])] and p.windows == 1


def test_an_exception_in_on_trace_ready_is_raised_by_step():
    def ready(trace):
        raise KeyError("from the callback")

    p = loom.profile(schedule=loom.schedule(active=1, repeat=1), on_trace_ready=ready)
    p.start()
    try:
        with pytest.raises(KeyError, match="from the callback"):
            p.step()  # ends step 0, the window's only step
    finally:
        p.stop()


def early_run(mode):
    # this process imported loom: its OPENCL_LAYERS would reach the child's
    # start, where the loader finds it at any first call
    env = {k: v for k, v in os.environ.items() if k != "OPENCL_LAYERS"}
    r = subprocess.run([sys.executable, os.path.join(HERE, "opencl_early.py"), mode],
                       capture_output=True, text=True, timeout=300, env=env)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout.splitlines()[-1])


def test_opencl_used_before_import_is_named_not_silent():
    """The ICD loader reads OPENCL_LAYERS once, at the first OpenCL call: a
    program that made one before `import loom` cannot have its OpenCL
    recorded, and is told so (a LoomWarning at start, the trace's warning,
    the backend's reason) instead of getting an empty trace silently."""
    early = early_run("early")
    assert early["cats"].get("kernel", 0) == 0 and "opencl_runtime" not in early["cats"]
    said = "OpenCL was initialised in this process before loom's layer was set"
    assert len(early["trace_warnings"]) == 1 and said in early["trace_warnings"][0]
    assert "import loom before the program's first OpenCL call" in early["trace_warnings"][0]
    assert early["issued"] == early["trace_warnings"]
    assert early["state"] == "unavailable" and said in early["reason"]
    # the library only loaded (no call) before import loom: recorded as usual
    loaded = early_run("loaded")
    assert loaded["cats"]["kernel"] == 6 and loaded["cats"]["gpu_memcpy"] == 2
    assert loaded["trace_warnings"] == [] and loaded["issued"] == []
    assert loaded["state"] == "available" and loaded["checksum"] == early["checksum"]
