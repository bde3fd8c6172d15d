#!/usr/bin/python3
"""Per-op cost of recording a small PyTorch training loop, against the floor
any RecordFunction observer pays, all measured in the same run.  A benchmark,
run by hand, never a test:

  /usr/bin/python3 bench/bench_pytorch.py [--loom-bin PATH]... [--floor SO]
                   [--steps N] [--rounds R] [--clock cpu|wall] [--idle-thread]

Ways, each in its own fresh child process (`bench_pytorch.py --child N --mode
M`), in R interleaved rounds (default 15), so that a machine's drift hits all
of them alike:
  plain                      no observer
  floor                      an empty global RecordFunction callback
                             (build/bench/bench_rf_floor.so, --floor SO)
  floor, inputs              the same asking for the ops' inputs
  torch.profiler             profile(activities=[CPU])
  torch.profiler, shapes     the same with record_shapes=True
  loom, no shapes            loom record --option pytorch.shapes=0
  loom                       loom record (input shapes and types)
PATH defaults to $LOOM_BIN, else the build next to this file, else
/work/main/build/loom; given more than once, every build is measured (the
last one also without shapes).  Each child warms up 20 steps, times N steps
(default 200) 3 times and keeps the best.  --clock cpu (default) times the
stepping thread's CPU time (steadier on a shared machine; the model runs on
one thread), --clock wall the wall time.  --idle-thread: every child
starts a Python thread that only sleeps before it imports torch, so the
process is multi-threaded, as one with an intra-op pool or a data loading
thread is (loom's pager, src/record/pager.c, runs only in such a process).  Ops per step come from the
profiler's event count (ops, not the record_function / optimizer ranges).

Printed: each way's added us per op over plain, min and median over the
rounds with the median's bootstrap standard error; loom's cost above the
floor with the same information (no shapes: floor; shapes: floor, inputs),
per round, paired; loom's added cost against torch.profiler's; and issue
38's goal lines for the last build given, by the median of those paired
differences: `goal torch_op: X us (target 0.10) met|missed` (loom without
shapes above the floor) and `goal torch_op_shapes: X us (target 0.20) ...`
(loom, input shapes and types, above the floor asking for the inputs).
"""
import argparse
import ctypes
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time

REPEATS = 3
WARMUP = 20
USER_PREFIXES = ("train_step", "Optimizer.")
HERE = os.path.dirname(os.path.abspath(__file__))


def child(steps, mode, floor, idle_thread):
    if idle_thread:
        import threading
        threading.Thread(target=time.sleep, args=(1e6,), daemon=True).start()
    import torch
    from torch import nn

    lib = None
    if mode in ("floor", "floor-inputs"):
        lib = ctypes.CDLL(floor, mode=ctypes.RTLD_GLOBAL)  # after torch: its libtorch
        lib.bench_rf_floor_add.restype = ctypes.c_uint64
        lib.bench_rf_floor_starts.restype = ctypes.c_uint64
        lib.bench_rf_floor_add(1 if mode == "floor-inputs" else 0)
    torch.manual_seed(0)
    torch.set_num_threads(1)
    model = nn.Sequential(nn.Conv2d(3, 8, 3), nn.ReLU(), nn.Flatten(), nn.Linear(8 * 14 * 14, 10))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x = torch.randn(4, 3, 16, 16)
    y = torch.randint(0, 10, (4,))

    def run(n):
        for _ in range(n):
            with torch.autograd.profiler.record_function("train_step"):
                opt.zero_grad()
                loss = nn.functional.cross_entropy(model(x), y)
                loss.backward()
                opt.step()

    run(WARMUP)
    best, best_cpu, ops = float("inf"), float("inf"), 0
    for _ in range(REPEATS):
        if mode in ("profiler", "shapes"):
            from torch.profiler import ProfilerActivity, profile
            with profile(activities=[ProfilerActivity.CPU], record_shapes=(mode == "shapes")) as prof:
                t0, c0 = time.perf_counter(), time.thread_time()
                run(steps)
                dt, dc = time.perf_counter() - t0, time.thread_time() - c0
            ops = sum(1 for e in prof.events() if not e.name.startswith(USER_PREFIXES))
        else:
            t0, c0 = time.perf_counter(), time.thread_time()
            run(steps)
            dt, dc = time.perf_counter() - t0, time.thread_time() - c0
        best, best_cpu = min(best, dt), min(best_cpu, dc)
    if lib is not None and lib.bench_rf_floor_starts() < steps:
        sys.exit("the floor's callback did not observe the ops")
    print(json.dumps({"wall": best * 1e3 / steps, "cpu": best_cpu * 1e3 / steps, "ops": ops}))


def spawn(cmd, clock):
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if r.returncode:
        sys.exit("failed (%d): %s\n%s" % (r.returncode, " ".join(cmd), r.stderr))
    out = json.loads(r.stdout.strip().splitlines()[-1])
    out["ms"] = out[clock]
    return out


def loom_run(loom_bin, me, clock, extra=()):
    fd, trace = tempfile.mkstemp(suffix=".json")
    os.close(fd)
    try:
        r = spawn([loom_bin, "record", "-o", trace] + list(extra) + ["--"] + me + ["plain"], clock)
        with open(trace) as f:
            ev = json.load(f)["traceEvents"]
        r["cpu_ops"] = sum(1 for e in ev if e.get("cat") == "cpu_op")
    finally:
        os.unlink(trace)
    return r


def default_loom():
    if os.environ.get("LOOM_BIN"):
        return os.environ["LOOM_BIN"]
    mine = os.path.join(HERE, "..", "build", "loom")
    return mine if os.path.exists(mine) else "/work/main/build/loom"


def med_se(v, n=2000):
    """median and its bootstrap standard error"""
    rnd = random.Random(1)
    meds = [statistics.median(rnd.choices(v, k=len(v))) for _ in range(n)]
    return statistics.median(v), statistics.pstdev(meds)


def line(name, v):
    m, se = med_se(v)
    print("%-40s %6.3f %6.3f +- %.3f" % (name, min(v), m, se))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--loom-bin", action="append")
    ap.add_argument("--floor", default=os.path.join(HERE, "..", "build", "bench", "bench_rf_floor.so"))
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--clock", default="cpu", choices=("wall", "cpu"))
    ap.add_argument("--idle-thread", action="store_true")
    ap.add_argument("--child", type=int)
    ap.add_argument("--mode", default="plain",
                    choices=("plain", "floor", "floor-inputs", "profiler", "shapes"))
    a = ap.parse_args()
    if a.child:
        return child(a.child, a.mode, os.path.abspath(a.floor), a.idle_thread)
    if not os.path.exists(a.floor):
        sys.exit("no %s: build it (cmake --build build --target bench_rf_floor) or give --floor" % a.floor)
    looms = a.loom_bin or [default_loom()]
    me = [sys.executable, os.path.abspath(__file__), "--floor", os.path.abspath(a.floor)]
    me += ["--idle-thread"] if a.idle_thread else []
    me += ["--child", str(a.steps), "--mode"]
    print("PyTorch %s, %d steps x best of %d per process, %d interleaved rounds, %s time%s; loom: %s"
          % (__import__("torch").__version__, a.steps, REPEATS, a.rounds, a.clock,
             ", an idle thread" if a.idle_thread else "", " ".join(looms)))
    ways = [("plain", lambda: spawn(me + ["plain"], a.clock)),
            ("floor", lambda: spawn(me + ["floor"], a.clock)),
            ("floor, inputs", lambda: spawn(me + ["floor-inputs"], a.clock)),
            ("torch.profiler", lambda: spawn(me + ["profiler"], a.clock)),
            ("torch.profiler, shapes", lambda: spawn(me + ["shapes"], a.clock)),
            ("loom, no shapes", lambda: loom_run(looms[-1], me, a.clock, ["--option", "pytorch.shapes=0"]))]
    for b in looms:
        name = "loom" if len(looms) == 1 else "loom %s" % b
        ways.append((name, lambda b=b: loom_run(b, me, a.clock)))
    added = {n: [] for n, _ in ways[1:]}
    ops, traced = [], []
    for i in range(a.rounds):
        r = {}
        order = ways[:]
        random.Random(i).shuffle(order)  # no way always runs right after another
        for name, fn in order:
            r[name] = fn()
        per_step = r["torch.profiler"]["ops"] / a.steps
        ops.append(per_step)
        traced.append(r[ways[-1][0]]["cpu_ops"] / (REPEATS * a.steps + WARMUP))
        base = r["plain"]["ms"]
        for name in added:
            added[name].append((r[name]["ms"] - base) * 1e3 / per_step)
        print("round %2d: plain %.3f ms/step; added us/op: %s" % (
            i + 1, base, ", ".join("%s %.2f" % (n, v[-1]) for n, v in added.items())), flush=True)
    print("ops per step: %.1f (torch.profiler's events); loom's trace: %.1f cpu_op per step"
          % (statistics.median(ops), statistics.median(traced)))
    print("\n%-40s %6s %6s" % ("added us/op over plain", "min", "median"))
    for name, v in added.items():
        line(name, v)
    print("\nloom above the floor with the same information (paired per round), us/op")
    pairs = [("loom, no shapes", "floor")] + [(n, "floor, inputs") for n, _ in ways[6:]]
    above = {}
    for l, f in pairs:
        above[l] = [x - y for x, y in zip(added[l], added[f])]
        line("%s - %s" % (l, f), above[l])
    print("\nloom's added cost / torch.profiler's (ratio of medians; goal <= 0.5)")
    for l, p in [("loom, no shapes", "torch.profiler")] + [(n, "torch.profiler, shapes") for n, _ in ways[6:]]:
        print("%-40s %6.2f" % ("%s / %s" % (l, p),
                               statistics.median(added[l]) / statistics.median(added[p])))
    # issue 38's goals: the last build given, by median of the paired differences
    for name, l, target in (("torch_op", "loom, no shapes", 0.10),
                            ("torch_op_shapes", ways[-1][0], 0.20)):
        m = statistics.median(above[l])
        print("goal %s: %.3f us (target %.2f) %s" % (name, m, target,
                                                    "met" if m <= target else "missed"))


if __name__ == "__main__":
    main()
