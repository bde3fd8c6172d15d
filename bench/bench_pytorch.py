#!/usr/bin/python3
"""Per-op cost of recording a small PyTorch training loop: plain, under
torch.profiler.profile(activities=[CPU]) (also with record_shapes=True, as
loom records input shapes) and under `loom record` (the PyTorch adapter).
A benchmark, run by hand, never a test:

  /usr/bin/python3 bench/bench_pytorch.py [--loom-bin PATH]... [--steps N] [--rounds R]

PATH defaults to $LOOM_BIN, else /work/main/build/loom; given more than once
(e.g. a build before and after a change), every build is measured in every
round.  R rounds (default 1) run every way in turn, so that a machine's drift
hits all of them alike; with more than one round a summary gives each way's
added us/op as min-max (median).  --clock cpu times the stepping thread's CPU
time instead of wall time (steadier on a machine shared with other work; the
model runs on one thread).  Every way runs in
its own fresh child process (`bench_pytorch.py --child N --mode M`; the loom
one as `loom record -o TMP.json -- /usr/bin/python3 bench_pytorch.py --child N
--mode plain`), which warms up, times N steps 3 times and prints the best.
Ops per step come from the profiler's event count (ops only, not the
record_function / optimizer ranges), so the plain run counts nothing itself.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

REPEATS = 3
USER_PREFIXES = ("train_step", "Optimizer.")


def child(steps, mode):
    import torch
    from torch import nn

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

    run(20)  # warm-up
    best, best_cpu, ops = float("inf"), float("inf"), 0
    for _ in range(REPEATS):
        if mode == "plain":
            t0, c0 = time.perf_counter(), time.thread_time()
            run(steps)
            dt, dc = time.perf_counter() - t0, time.thread_time() - c0
        else:
            from torch.profiler import ProfilerActivity, profile
            with profile(activities=[ProfilerActivity.CPU], record_shapes=(mode == "shapes")) as prof:
                t0, c0 = time.perf_counter(), time.thread_time()
                run(steps)
                dt, dc = time.perf_counter() - t0, time.thread_time() - c0
            ops = sum(1 for e in prof.events() if not e.name.startswith(USER_PREFIXES))
        best, best_cpu = min(best, dt), min(best_cpu, dc)
    print(json.dumps({"wall": best * 1e3 / steps, "cpu": best_cpu * 1e3 / steps, "ops": ops}))


CLOCK = "wall"


def spawn(cmd):
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if r.returncode:
        sys.exit("failed (%d): %s\n%s" % (r.returncode, " ".join(cmd), r.stderr))
    out = json.loads(r.stdout.strip().splitlines()[-1])
    out["ms_per_step"] = out[CLOCK]
    return out


def loom_run(loom_bin, me, extra=()):
    fd, trace = tempfile.mkstemp(suffix=".json")
    os.close(fd)
    try:
        r = spawn([loom_bin, "record", "-o", trace] + list(extra) + ["--"] + me + ["plain"])
        with open(trace) as f:
            ev = json.load(f)["traceEvents"]
        r["cpu_ops"] = sum(1 for e in ev if e.get("cat") == "cpu_op")
    finally:
        os.unlink(trace)
    return r


def one_round(a, me, looms):
    plain = spawn(me + ["plain"])
    prof = spawn(me + ["profiler"])
    shapes = spawn(me + ["shapes"])
    runs = [(b, loom_run(b, me)) for b in looms]
    # like torch.profiler's default (no record_shapes): no input shapes/types
    noshapes = loom_run(looms[-1], me, ["--option", "pytorch.shapes=0"])
    per_step = prof["ops"] / a.steps
    base = plain["ms_per_step"]
    total = REPEATS * a.steps + 20
    print("ops per step: %.1f (torch.profiler events); loom trace: %s cpu_op per step over %d steps"
          % (per_step, " / ".join("%.1f" % (r["cpu_ops"] / total) for _, r in runs), total))
    print("%-36s %10s %14s" % ("", "ms/step", "added us/op"))
    print("%-36s %10.3f %14s" % ("plain", base, "-"))
    ways = [("torch.profiler (CPU)", prof), ("torch.profiler (CPU, record_shapes)", shapes)]
    for b, r in runs:
        name = "loom record (shapes, seq nr)"
        if len(runs) > 1:
            name = "loom %s" % b
        ways.append((name, r))
    ways.append(("loom record (seq nr, no shapes)", noshapes))
    added = {}
    for name, r in ways:
        added[name] = (r["ms_per_step"] - base) * 1e3 / per_step
        print("%-36s %10.3f %14.2f" % (name, r["ms_per_step"], added[name]))
    for name, _ in ways[2:-1]:
        print("%s / torch.profiler added cost: %.2f (vs record_shapes: %.2f)"
              % (name, added[name] / added["torch.profiler (CPU)"],
                 added[name] / added["torch.profiler (CPU, record_shapes)"]))
    print("loom record (seq nr, no shapes) / torch.profiler added cost: %.2f"
          % (added["loom record (seq nr, no shapes)"] / added["torch.profiler (CPU)"]))
    return added


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--loom-bin", action="append")
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--clock", default="wall", choices=("wall", "cpu"))
    ap.add_argument("--child", type=int)
    ap.add_argument("--mode", default="plain", choices=("plain", "profiler", "shapes"))
    a = ap.parse_args()
    if a.child:
        return child(a.child, a.mode)

    global CLOCK
    CLOCK = a.clock
    looms = a.loom_bin or [os.environ.get("LOOM_BIN", "/work/main/build/loom")]
    me = [sys.executable, os.path.abspath(__file__), "--child", str(a.steps), "--mode"]
    print("PyTorch %s, %d steps x best of %d, %d round(s), %s time" % (
        __import__("torch").__version__, a.steps, REPEATS, a.rounds, a.clock))
    rounds = []
    for i in range(a.rounds):
        if a.rounds > 1:
            print("-- round %d" % (i + 1))
        rounds.append(one_round(a, me, looms))
    if a.rounds > 1:
        print("-- added us/op over %d rounds: min-max (median)" % a.rounds)
        for name in rounds[0]:
            v = sorted(r[name] for r in rounds)
            print("%-36s %.2f-%.2f (%.2f)" % (name, v[0], v[-1], v[len(v) // 2]))


if __name__ == "__main__":
    main()
