#!/usr/bin/python3
"""Per-op cost of recording a small PyTorch training loop: plain, under
torch.profiler.profile(activities=[CPU]) (also with record_shapes=True, as
loom records input shapes) and under `loom record` (the PyTorch adapter).
A benchmark, run by hand, never a test:

  /usr/bin/python3 bench/bench_pytorch.py [--loom-bin PATH] [--steps N]

PATH defaults to $LOOM_BIN, else /work/main/build/loom.  Every way runs in
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
    best, ops = float("inf"), 0
    for _ in range(REPEATS):
        if mode == "plain":
            t0 = time.perf_counter()
            run(steps)
            dt = time.perf_counter() - t0
        else:
            from torch.profiler import ProfilerActivity, profile
            with profile(activities=[ProfilerActivity.CPU], record_shapes=(mode == "shapes")) as prof:
                t0 = time.perf_counter()
                run(steps)
                dt = time.perf_counter() - t0
            ops = sum(1 for e in prof.events() if not e.name.startswith(USER_PREFIXES))
        best = min(best, dt)
    print(json.dumps({"ms_per_step": best * 1e3 / steps, "ops": ops}))


def spawn(cmd):
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if r.returncode:
        sys.exit("failed (%d): %s\n%s" % (r.returncode, " ".join(cmd), r.stderr))
    return json.loads(r.stdout.strip().splitlines()[-1])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--loom-bin", default=os.environ.get("LOOM_BIN", "/work/main/build/loom"))
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--child", type=int)
    ap.add_argument("--mode", default="plain", choices=("plain", "profiler", "shapes"))
    a = ap.parse_args()
    if a.child:
        return child(a.child, a.mode)

    me = [sys.executable, os.path.abspath(__file__), "--child", str(a.steps), "--mode"]
    plain = spawn(me + ["plain"])
    prof = spawn(me + ["profiler"])
    shapes = spawn(me + ["shapes"])
    fd, trace = tempfile.mkstemp(suffix=".json")
    os.close(fd)
    try:
        loom = spawn([a.loom_bin, "record", "-o", trace, "--"] + me + ["plain"])
        with open(trace) as f:
            ev = json.load(f)["traceEvents"]
        loom_ops = sum(1 for e in ev if e.get("cat") == "cpu_op")
    finally:
        os.unlink(trace)

    per_step = prof["ops"] / a.steps
    base = plain["ms_per_step"]
    print("PyTorch %s, %d steps x best of %d, %s" % (__import__("torch").__version__, a.steps, REPEATS,
                                                     os.path.basename(a.loom_bin)))
    print("ops per step: %.1f (torch.profiler events); loom trace: %.1f cpu_op per step over %d steps"
          % (per_step, loom_ops / ((REPEATS * a.steps) + 20), REPEATS * a.steps + 20))
    print("%-36s %10s %14s" % ("", "ms/step", "added us/op"))
    print("%-36s %10.3f %14s" % ("plain", base, "-"))
    added = {}
    for name, r in (("torch.profiler (CPU)", prof), ("torch.profiler (CPU, record_shapes)", shapes),
                    ("loom record (shapes, seq nr)", loom)):
        added[name] = (r["ms_per_step"] - base) * 1e3 / per_step
        print("%-36s %10.3f %14.2f" % (name, r["ms_per_step"], added[name]))
    lo = added["loom record (shapes, seq nr)"]
    print("loom / torch.profiler added cost: %.2f (vs record_shapes: %.2f)"
          % (lo / added["torch.profiler (CPU)"], lo / added["torch.profiler (CPU, record_shapes)"]))


if __name__ == "__main__":
    main()
