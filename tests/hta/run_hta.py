#!/usr/bin/python3
"""Runs the real Holistic Trace Analysis (from its source tree) on Kineto
traces and writes the figures `loom report` reproduces, one JSON file per
trace, in the layout tests/hta/compare.py reads.

  /usr/bin/python3 run_hta.py HTA_SOURCE_DIR OUT_DIR TRACE...

HTA is pure Python over pandas; it needs pandas, numpy, networkx and plotly
(python3-networkx and python3-plotly from Debian; the plots are not drawn).
Every analysis runs with visualize=False and HTA's defaults, except
include_memory_kernels=True for the kernel breakdown (as loom gives it).
A trace on which HTA fails records the error instead of the figures."""
import json
import logging
import os
import sys
import traceback

hta_src, out_dir, traces = sys.argv[1], sys.argv[2], sys.argv[3:]
sys.path.insert(0, hta_src)
logging.disable(logging.WARNING)
from hta.trace_analysis import TraceAnalysis  # noqa: E402
from hta.version import __version__  # noqa: E402


def records(df):
    return json.loads(df.to_json(orient="records"))


def figures(path):
    a = TraceAnalysis(trace_files={0: os.path.abspath(path)}, trace_dir="")
    got = {}
    for name, fn in [
        ("temporal_breakdown", lambda: records(a.get_temporal_breakdown(visualize=False))[0]),
        ("comp_comm_overlap_pctg",
         lambda: records(a.get_comm_comp_overlap(visualize=False))[0]["comp_comm_overlap_pctg"]),
        ("kernel_type", lambda: records(a.get_gpu_kernel_breakdown(
            visualize=False, include_memory_kernels=True)[0])),
        ("idle_time", lambda: records(a.get_idle_time_breakdown(visualize=False)[0])),
        ("launch", lambda: records(a.get_cuda_kernel_launch_stats(visualize=False)[0])),
    ]:
        try:
            got[name] = fn()
        except Exception as e:  # noqa: BLE001 - HTA's own failure is a result
            got[name + "_error"] = f"{type(e).__name__}: {e}"
    if "launch" in got:  # the figures loom gives of HTA's per-launch table
        rows = got.pop("launch")
        d = sorted(r["launch_delay"] for r in rows)
        n = len(d)
        med = (d[(n - 1) // 2] + d[n // 2]) / 2 if n else None
        got["launch_stats"] = {
            "launches": n, "launch_delay_mean": sum(d) / n if n else None,
            "launch_delay_median": med, "launch_delay_min": d[0] if n else None,
            "launch_delay_max": d[-1] if n else None,
            "runtime_over_50us": sum(r["cpu_duration"] > 50 for r in rows),
            "launch_delay_over_100us": sum(r["launch_delay"] > 100 for r in rows),
            "short_kernels": sum(r["cpu_duration"] <= 50 and r["gpu_duration"] < r["cpu_duration"]
                                 for r in rows)}
    return got


os.makedirs(out_dir, exist_ok=True)
for path in traces:
    try:
        got = figures(path)
    except Exception:  # noqa: BLE001
        got = {"error": traceback.format_exc(limit=2).strip().splitlines()[-1]}
    got["trace"] = path
    got["hta"] = f"Holistic Trace Analysis {__version__}"
    rel = path.split("/data/", 1)[-1]  # HTA's tests/data/<dir>/<file>
    name = rel.split(".")[0].replace("/", "__")
    with open(os.path.join(out_dir, name + ".json"), "w") as f:
        json.dump(got, f, indent=1, sort_keys=True)
    print(name, "error" if "error" in got else "ok", [k for k in got if k.endswith("_error")])
