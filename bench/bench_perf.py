#!/usr/bin/python3
"""bench_perf.py - what CPU sampling (libloom-perf.so) costs a CPU-bound
program, and what naming its samples costs after recording.

  /usr/bin/python3 bench/bench_perf.py LOOM WORK [ROUNDS] [KEY=VALUE...]

LOOM is build/loom, WORK is build/bench/bench_perf_work (a fixed amount of
work, about 1 s here, that prints its own wall and CPU time).  Cases, one
of each per round, in a rotating order (the machine is shared): the program
alone (plain), the program sampling itself as cheaply as any sampler can
(floor: a cpu-clock perf event at 1 kHz with only the time in each sample,
its ring emptied by a thread; `bench_perf_work 60 1000`), under `loom record
--devices cpu` (loom, no sampling), and
under `loom record --devices cpu,perf` with the default options and with
each KEY=VALUE given (--option KEY=VALUE, e.g. perf.frequency=4000 or
perf.stack=8192; several joined by commas make one case).  Prints min and median of the work's
own wall time and of the whole command's wall time (loom's start, the
unwinding and naming of samples after the program, the trace written), the
ratios of the minima and medians against plain, the same for the work's
process CPU time (steadier on a loaded machine; it includes the kernel's
sampling and the perf reader thread), and, from the trace's
metadata, samples, distinct frames, unwinding time per sample and naming
(symbolization) time per distinct frame and per sample.
"""
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time


def run(cmd, out):
    t0 = time.perf_counter()
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    wall = time.perf_counter() - t0
    if p.returncode != 0:
        sys.exit("failed (%d): %s\n%s" % (p.returncode, " ".join(cmd), p.stderr))
    work = cpu = None
    for line in p.stdout.splitlines():
        f = line.split()
        if len(f) == 4 and f[0] == "work_wall_ns":
            work, cpu = int(f[1]) / 1e9, int(f[3]) / 1e9
    if work is None:
        sys.exit("no work_wall_ns line from %s:\n%s" % (cmd[-1], p.stdout))
    meta = None
    if out and out.endswith(".json"):
        with open(out) as fh:
            t = json.load(fh)
        meta = {k: v for k, v in t.items() if k.startswith("perf.")}
        meta["dropped"] = t.get("loom_dropped", 0)
        meta["warnings"] = t.get("loom_warnings", [])
    return work, cpu, wall, meta


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    loom, work = sys.argv[1], sys.argv[2]
    rounds = int(sys.argv[3]) if len(sys.argv) > 3 else 7
    variants = sys.argv[4:]
    tmp = tempfile.mkdtemp(prefix="bench_perf.")
    cases = [("plain", None, [])]
    cases.append(("floor: minimal sampler 1 kHz", None, ["60", "1000"]))
    cases.append(("loom", "cpu", []))
    cases.append(("perf (defaults)", "cpu,perf", []))
    for v in variants:
        opts = []
        for kv in v.split(","):
            opts += ["--option", kv]
        cases.append(("perf " + v, "cpu,perf", opts))
    res = {c[0]: {"work": [], "cpu": [], "wall": [], "meta": []} for c in cases}
    for r in range(rounds):
        k = r % len(cases)
        for name, devices, extra in cases[k:] + cases[:k]:
            if devices is None:
                cmd, out = [work] + extra, None
            else:
                out = os.path.join(tmp, "t.json")
                cmd = [loom, "record", "--devices", devices, "-o", out] + extra + ["--", work]
            w, cpu, wall, meta = run(cmd, out)
            res[name]["work"].append(w)
            res[name]["cpu"].append(cpu)
            res[name]["wall"].append(wall)
            if meta and "perf.samples" in meta:
                res[name]["meta"].append(meta)
    base = res["plain"]
    bw_min, bw_med = min(base["work"]), statistics.median(base["work"])
    bt_min, bt_med = min(base["wall"]), statistics.median(base["wall"])
    print("bench_perf: %d rounds, %s, %d CPUs" % (rounds, os.path.basename(work), os.cpu_count()))
    print("%-30s %9s %9s %8s %8s | %9s %9s %8s %8s" %
          ("case", "work min", "median", "x min", "x med", "cmd min", "median", "x min", "x med"))
    for name, _, _ in cases:
        v = res[name]
        wm, wd = min(v["work"]), statistics.median(v["work"])
        tm, td = min(v["wall"]), statistics.median(v["wall"])
        print("%-30s %8.3fs %8.3fs %8.4f %8.4f | %8.3fs %8.3fs %8.4f %8.4f" %
              (name, wm, wd, wm / bw_min, wd / bw_med, tm, td, tm / bt_min, td / bt_med))
    bc_min, bc_med = min(base["cpu"]), statistics.median(base["cpu"])
    print("\nthe work's process CPU time (its thread, the kernel's sampling charged to it, and the "
          "perf reader thread):")
    print("%-30s %9s %9s %8s %8s" % ("case", "cpu min", "median", "x min", "x med"))
    for name, _, _ in cases:
        v = res[name]["cpu"]
        cm, cd = min(v), statistics.median(v)
        print("%-30s %8.3fs %8.3fs %8.4f %8.4f" % (name, cm, cd, cm / bc_min, cd / bc_med))
    print("\nnaming and unwinding after recording (medians over rounds):")
    for name, _, _ in cases:
        ms = res[name]["meta"]
        if not ms:
            continue
        def med(key):
            return statistics.median(float(m.get(key, 0)) for m in ms)
        n, d = med("perf.samples"), med("perf.distinct_frames")
        sym, unw = med("perf.symbolize_ns"), med("perf.unwind_ns")
        lost = sum(1 for m in ms if m["dropped"] or m["warnings"])
        print("  %-28s %6.0f samples, %4.0f distinct frames; symbolize %.1f ms = %.0f us/frame, "
              "%.1f us/sample; unwind %.1f ms = %.1f us/sample; runs with drops/warnings: %d" %
              (name, n, d, sym / 1e6, sym / 1e3 / d if d else 0, sym / 1e3 / n if n else 0,
               unw / 1e6, unw / 1e3 / n if n else 0, lost))


if __name__ == "__main__":
    main()
