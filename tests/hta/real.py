#!/usr/bin/python3
"""Compares `loom report --json`'s HTA section with figures the real
Holistic Trace Analysis (0.1.0, the newest complete version that could be
rebuilt here; HTA is not packaged for Debian and PyPI is out of reach) gave
for the same Kineto traces, kept in tests/data/report/hta-0.1.0/ with how
they were made.  HTA's time columns are the trace's microseconds (0.1.0
labels them "(ns)"); loom's are nanoseconds.

  /usr/bin/python3 real.py LOOM_BIN DATA_DIR"""
import glob
import json
import os
import subprocess
import sys

loom, data = sys.argv[1], sys.argv[2]
failures = compared = 0


def same(what, got, want, tol=1e-6):
    global failures, compared
    compared += 1
    ok = (got is None and want is None) or (got is not None and want is not None and abs(got - want) <= tol)
    failures += not ok
    print(f"  {'ok ' if ok else 'BAD'} {what}: loom {got} HTA {want}")


for path in sorted(glob.glob(os.path.join(data, "report", "hta-0.1.0", "*.json"))):
    want = json.load(open(path))
    trace = os.path.join(data, want["trace"].split("tests/data/", 1)[1])
    print(trace)
    h = json.loads(subprocess.run([loom, "report", trace, "--json", "--all"], check=True,
                                  capture_output=True, text=True).stdout)["hta"]
    us = lambda ns: ns / 1000.0  # noqa: E731
    tb, wt = h["temporal_breakdown"], want["temporal_breakdown"]
    for k in ["idle_time", "compute_time", "non_compute_time", "kernel_time"]:
        same("temporal " + k, us(tb[k + "_ns"]), wt[k + "(ns)"])
    for k in ["idle_time_pctg", "compute_time_pctg", "non_compute_time_pctg"]:
        same("temporal " + k, tb[k], wt[k])
    same("comm/comp overlap %", h["comp_comm_overlap_pctg"], want["comp_comm_overlap_pctg"])
    kt = {k["kernel_type"]: k for k in h["kernel_types"]}
    for k in want["kernel_type"]:
        got = kt.get(k["kernel_type"])
        same("kernel type sum " + k["kernel_type"], us(got["sum_ns"]) if got else None, k["sum"])
        same("kernel type % " + k["kernel_type"], got["percentage"] if got else None, k["percentage"])
    same("kernel types listed", len(kt), len(want["kernel_type"]))
    idle = {(i["stream"] % (1 << 32), i["idle_category"]): i for i in h["idle_time_breakdown"]}
    for i in want["idle_time"]:
        got = idle.get((i["stream"], i["idle_category"]))
        key = f"idle stream {i['stream']} {i['idle_category']}"
        same(key, us(got["idle_time_ns"]) if got else None, i["idle_time"])
        same(key + " ratio", got["idle_time_ratio"] if got else None, i["idle_time_ratio"])
    same("idle rows", len(idle), len(want["idle_time"]))
    if "launch_stats" in want:
        ls, wl = h["launch_stats"], want["launch_stats"]
        same("launches", ls["launches"], wl["launches"])
        same("launch delay mean", us(ls["launch_delay"]["mean_ns"]), wl["launch_delay_mean"], 1e-3)
        same("launch delay max", us(ls["launch_delay"]["max_ns"]), wl["launch_delay_max"])
        same("launch delay min", us(ls["launch_delay"]["min_ns"]), wl["launch_delay_min"])
        same("launch delay median", us(ls["launch_delay"]["p50_ns"]), wl["launch_delay_median"])
        for k in ["runtime_over_50us", "launch_delay_over_100us", "short_kernels"]:
            same(k, ls[k], wl[k])
print(f"{compared - failures} of {compared} figures equal HTA's" + ("" if not failures else f"; {failures} differ"))
sys.exit(1 if failures or compared < 50 else 0)  # 54 figures in the two files
