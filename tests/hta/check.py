#!/usr/bin/python3
"""Compares `loom report --json`'s Holistic Trace Analysis figures with the
pandas reference (reference.py) on each trace given:

  /usr/bin/python3 check.py LOOM_BIN TRACE...

Exits 0 when every figure matches (times to the nanosecond, shares to the
printed digits), 77 (skipped) when pandas is missing, 1 otherwise."""
import json
import os
import subprocess
import sys

try:
    import pandas  # noqa: F401
except ImportError:
    print("SKIP: python3-pandas is not installed")
    sys.exit(1 if os.environ.get("LOOM_TP_REQUIRED") else 77)  # required in scripts/test.sh

HERE = os.path.dirname(os.path.abspath(__file__))
failures = 0


def same(what, got, want, tol=1e-6):
    global failures
    ok = (got is None and want is None) or (got is not None and want is not None and abs(got - want) <= tol)
    if not ok:
        failures += 1
    print(f"  {'ok ' if ok else 'BAD'} {what}: loom {got} reference {want}")


def check(loom, trace):
    print(trace)
    rep = json.loads(subprocess.run([loom, "report", trace, "--json", "--all"], check=True,
                                    capture_output=True, text=True).stdout)
    ref = json.loads(subprocess.run([sys.executable, os.path.join(HERE, "reference.py"), trace],
                                    check=True, capture_output=True, text=True).stdout)
    d = rep["hta"]
    same("last step left out", d["last_step_left_out"], ref["last_step_left_out"])
    same("GPU events", d["events"], ref["gpu_events"])
    if not ref["gpu_events"]:
        return
    us = lambda ns: ns / 1000.0  # noqa: E731
    tb, rt = d["temporal_breakdown"], ref["temporal_breakdown"]
    for k in ["kernel_time", "idle_time", "compute_time", "non_compute_time"]:
        same("temporal " + k, us(tb[k + "_ns"]), rt[k])
    for k in ["idle_time_pctg", "compute_time_pctg", "non_compute_time_pctg"]:
        same("temporal " + k, tb[k], rt[k])
    same("comm/comp overlap %", d["comp_comm_overlap_pctg"], ref["comp_comm_overlap_pctg"])
    kt = {k["kernel_type"]: us(k["sum_ns"]) for k in d["kernel_types"]}
    for k in sorted(set(kt) | set(ref["kernel_types"])):
        same("kernel type " + k, kt.get(k), ref["kernel_types"].get(k))
    idle = {(i["stream"] % (1 << 32), i["idle_category"]): us(i["idle_time_ns"]) for i in d["idle_time_breakdown"]}
    ridle = {(i["stream"], i["idle_category"]): i["idle_time"] for i in ref["idle_time_breakdown"]}
    for k in sorted(set(idle) | set(ridle)):
        same(f"idle stream {k[0]} {k[1]}", idle.get(k), ridle.get(k))
    ls, rl = d["launch_stats"], ref["launch_stats"]
    same("launches", ls["launches"], rl["launches"])
    same("launch delay mean", us(ls["launch_delay"]["mean_ns"]), rl["mean_delay"], 1e-3)
    same("launch delay max", us(ls["launch_delay"]["max_ns"]), rl["max_delay"])
    for k in ["runtime_over_50us", "launch_delay_over_100us", "short_kernels"]:
        same(k, ls[k], rl[k])
    if not ref["last_step_left_out"]:  # loom's kernel table covers the whole trace
        sums = {k["name"]: us(k["total_ns"]) for k in rep["kernels"]["top"]}
        for name, v in sorted(ref["kernel_sums"].items()):
            same("kernel sum " + name[:50], sums.get(name), v)


for t in sys.argv[2:]:
    check(sys.argv[1], t)
print("FAILED: %d figures differ" % failures if failures else "all figures match")
sys.exit(1 if failures else 0)
