#!/usr/bin/python3
"""e2e_train.py - the PyTorch CPU training job bench_e2e.py times whole: a
small convolutional network (two Conv2d + ReLU + MaxPool2d blocks, then a
Linear layer) trained with SGD on synthetic 32x32 RGB batches, on one
thread, knowing nothing of loom.

  e2e_train.py STEPS [--batch B] [--profile off|on|shapes] [--trace FILE]
               [--malloc-default] [--floor SO]

STEPS optimizer steps (each: zero_grad, forward, cross-entropy, backward,
step, inside a record_function("train_step") region) after 5 warm-up steps,
over 16 fixed batches of B images (default 8) drawn once from a seeded
generator.  --profile on / shapes: the program profiles itself with
torch.profiler (CPU activity, record_shapes off / on) around the warm-up and
the steps, and writes the profiler's trace with export_chrome_trace to
--trace FILE (required then): the export is part of the program, as it is
for a user.  The program first raises glibc's mmap and trim thresholds
(mallopt, 64 MiB and 256 MiB), as a training job tuned for speed does (or
one using jemalloc/tcmalloc): with glibc's defaults this loop's freed
activation buffers go back to the kernel and are faulted in again every step
(~340 page faults a step, the loop 2-3x slower), and how often depends on
the heap's layout, which any profiler's own allocations change (with
torch.profiler the loop ran twice as fast as plain).  --malloc-default keeps
glibc's defaults.  --floor SO: the floor of observing ops, an empty global
RecordFunction callback asking for the ops' inputs (bench_rf_floor.so, as
loom's adapter asks for them to record shapes), registered before the
warm-up.  Prints "loop_s S steps N" (the steps' own wall time, warm-up
and export excluded) and, profiling, "profiler_events E".
"""
import argparse
import ctypes
import time

import torch
from torch import nn


def build(batch):
    torch.manual_seed(0)
    torch.set_num_threads(1)
    model = nn.Sequential(
        nn.Conv2d(3, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(), nn.Linear(32 * 8 * 8, 10))
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    data = [(torch.randn(batch, 3, 32, 32), torch.randint(0, 10, (batch,))) for _ in range(16)]
    return model, opt, data


def train(model, opt, data, first, n):
    for i in range(first, first + n):
        x, y = data[i % len(data)]
        with torch.autograd.profiler.record_function("train_step"):
            opt.zero_grad()
            loss = nn.functional.cross_entropy(model(x), y)
            loss.backward()
            opt.step()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("steps", type=int)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--profile", default="off", choices=("off", "on", "shapes"))
    ap.add_argument("--trace")
    ap.add_argument("--malloc-default", action="store_true")
    ap.add_argument("--floor")
    a = ap.parse_args()
    if not a.malloc_default:
        libc = ctypes.CDLL("libc.so.6")
        libc.mallopt(-3, 64 << 20)  # M_MMAP_THRESHOLD
        libc.mallopt(-1, 256 << 20)  # M_TRIM_THRESHOLD
    if a.profile != "off" and not a.trace:
        ap.error("--profile needs --trace FILE")
    model, opt, data = build(a.batch)
    floor = None
    if a.floor:
        floor = ctypes.CDLL(a.floor, mode=ctypes.RTLD_GLOBAL)  # after torch: its libtorch
        floor.bench_rf_floor_starts.restype = ctypes.c_uint64
        floor.bench_rf_floor_add(1)
    if a.profile == "off":
        train(model, opt, data, 0, 5)
        t0 = time.perf_counter()
        train(model, opt, data, 5, a.steps)
        dt = time.perf_counter() - t0
    else:
        from torch.profiler import ProfilerActivity, profile
        with profile(activities=[ProfilerActivity.CPU], record_shapes=(a.profile == "shapes")) as p:
            train(model, opt, data, 0, 5)
            t0 = time.perf_counter()
            train(model, opt, data, 5, a.steps)
            dt = time.perf_counter() - t0
        p.export_chrome_trace(a.trace)
        print("profiler_events %d" % len(p.events()))
    if floor is not None and floor.bench_rf_floor_starts() < a.steps:
        raise SystemExit("the floor's callback did not observe the ops")
    print("loop_s %.6f steps %d" % (dt, a.steps))


if __name__ == "__main__":
    main()
