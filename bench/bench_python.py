"""Cost of an annotation from Python: `with loom.range(name):` against
torch.autograd.profiler.record_function(name) and against an empty `with`
block, in one run, interleaved (every case once per round), repeated;
prints min and median ns per block and the added cost over the floor (the
same loop with an empty `with` of a reused do-nothing context manager).

  PYTHONPATH=build/python /usr/bin/python3 bench/bench_python.py [N] [ROUNDS]

Two phases: idle (no session, no profiler) and recording (a loom session
and torch.profiler both running, so each tool records its own ranges).
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


CASES = [("loop, no with", run_plain), ("empty with (floor)", run_empty),
         ("with loom.range(name)", run_loom), ("with r (a reused loom.range)", run_loom_reused)]
if torch is not None:
    CASES.append(("with record_function(name)", run_torch))


def phase(title):
    times = {name: [] for name, _ in CASES}
    for _ in range(ROUNDS):
        for name, fn in CASES:
            times[name].append(fn(N) / N)
    floor = min(times["empty with (floor)"])
    print("%s: %d blocks per case per round, %d rounds, interleaved" % (title, N, ROUNDS))
    print("  %-30s %9s %9s %12s %8s" % ("case", "min ns", "median", "added (min)", "x floor"))
    for name, _ in CASES:
        v = times[name]
        print("  %-30s %9.1f %9.1f %12.1f %8.2f" % (name, min(v), statistics.median(v),
                                                     min(v) - floor, min(v) / floor))
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
