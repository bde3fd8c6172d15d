"""Cost of an annotation from Python: `with loom.range(name):` against
torch.autograd.profiler.record_function(name) and against an empty `with`
block, in one run, interleaved (every case once per round), repeated;
prints min and median ns per block, the added cost over the floor (the
same loop with an empty `with` of a reused do-nothing context manager; a
new one each time is shown too, as `with loom.range(name)` makes an object
per block) and record_function's cost over loom.range's.

  PYTHONPATH=build/python /usr/bin/python3 bench/bench_python.py [N] [ROUNDS]

Two phases: idle (no session, no profiler) and recording (a loom session
and torch.profiler both running, so each tool records its own ranges:
loom.range lands only in loom's session, record_function in torch.profiler
and, as torch_ops is off, not in loom's).
"""
import statistics
import sys
import time

import loom

try:
    import torch
    from torch.autograd.profiler import record_function
except ImportError:  # the loom cases still run
    torch = None

N = int(sys.argv[1]) if len(sys.argv) > 1 else 5000
ROUNDS = int(sys.argv[2]) if len(sys.argv) > 2 else 7


class Empty:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def run_plain(n):
    t = time.perf_counter_ns()
    for _ in range(n):
        pass
    return time.perf_counter_ns() - t


def run_empty(n, e=Empty()):
    t = time.perf_counter_ns()
    for _ in range(n):
        with e:
            pass
    return time.perf_counter_ns() - t


def run_empty_new(n, e=Empty):
    t = time.perf_counter_ns()
    for _ in range(n):
        with e():
            pass
    return time.perf_counter_ns() - t


def run_loom(n, r=loom.range):
    t = time.perf_counter_ns()
    for _ in range(n):
        with r("step"):
            pass
    return time.perf_counter_ns() - t


def run_loom_reused(n, r=loom.range("step")):
    t = time.perf_counter_ns()
    for _ in range(n):
        with r:
            pass
    return time.perf_counter_ns() - t


def run_torch(n):
    t = time.perf_counter_ns()
    for _ in range(n):
        with record_function("step"):
            pass
    return time.perf_counter_ns() - t


FLOOR = "empty with (floor)"
LOOM, TORCH = "with loom.range(name)", "with record_function(name)"
CASES = [("loop, no with", run_plain), (FLOOR, run_empty),
         ("empty with, a new object", run_empty_new),
         (LOOM, run_loom), ("with r (a reused loom.range)", run_loom_reused)]
if torch is not None:
    CASES.append((TORCH, run_torch))


def phase(title):
    """Every case once per round, in a rotating order; min and median."""
    times = {name: [] for name, _ in CASES}
    for r in range(ROUNDS):
        for j in range(len(CASES)):
            name, fn = CASES[(r + j) % len(CASES)]
            times[name].append(fn(N) / N)
    mins = {k: min(v) for k, v in times.items()}
    meds = {k: statistics.median(v) for k, v in times.items()}
    print("%s: %d blocks per case per round, %d rounds, interleaved" % (title, N, ROUNDS))
    print("  %-30s %9s %9s %13s %13s" % ("ns per block", "min", "median", "added (min)",
                                          "added (med)"))
    for name, _ in CASES:
        print("  %-30s %9.1f %9.1f %13.1f %13.1f" % (name, mins[name], meds[name],
                                                      mins[name] - mins[FLOOR],
                                                      meds[name] - meds[FLOOR]))
    if TORCH in times:
        add = {k: (mins[k] - mins[FLOOR], meds[k] - meds[FLOOR]) for k in (LOOM, TORCH)}
        if min(add[LOOM]) > 0.1 * mins[FLOOR]:
            print("  record_function / loom.range, added cost: %.1fx (min) %.1fx (median)" % (
                add[TORCH][0] / add[LOOM][0], add[TORCH][1] / add[LOOM][1]))
        else:  # a ratio to a few ns of noise would mean nothing
            print("  loom.range adds under 10%% of the floor: %.1f ns (min) %.1f ns (median)"
                  % add[LOOM])
        print("  record_function / loom.range, whole block: %.1fx (min) %.1fx (median)" % (
            mins[TORCH] / mins[LOOM], meds[TORCH] / meds[LOOM]))
    return times


for name, fn in CASES:  # warm up (interning, first calls)
    fn(1000)
idle = phase("idle (no session, no profiler)")
with loom.profile(kinds=["user_range"]) as p:
    if torch is not None:
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]):
            rec = phase("recording (a loom session and torch.profiler)")
    else:
        rec = phase("recording (a loom session)")
s = p.trace.summary()
print("loom trace: %d events, %d dropped" % (s["events"], s["dropped"]))
