#!/usr/bin/python3
"""`loom diff` against Holistic Trace Analysis's TraceDiff: every figure
HTA gives (per name: count and total duration in both runs, their
differences, the change category) equals loom's, and the asserts of HTA's
own test (tests/test_trace_diff.py) hold on loom's output.

  /usr/bin/python3 hta.py LOOM_BIN DATA_DIR [HTA_TESTS_DATA_DIR]

DATA_DIR: tests/data.  With HTA's tests/data folder also its trace_diff
control and test traces (first iteration) are compared with the stored
figures.  HTA names a copy by its whole name, loom by direction: HTA's
copies are summed by direction to compare; HTA's "ProfilerStep#N" is
loom's "ProfilerStep#*" (one row for every step)."""
import json
import os
import re
import subprocess
import sys

loom, data = sys.argv[1], sys.argv[2]
hta_data = sys.argv[3] if len(sys.argv) > 3 else None
CPU = ["ops", "user_ranges", "runtime_calls", "waits"]
GPU = ["kernels", "copies", "fills"]
failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print("BAD:", what)


def diff(base, new, *opts):
    out = subprocess.run([loom, "diff", base, new, "--json", "--all", *opts], check=True,
                         capture_output=True, text=True).stdout
    return json.loads(out)


def direction(name):
    for long, short in [("HostToDevice", "HtoD"), ("DeviceToHost", "DtoH"),
                        ("DeviceToDevice", "DtoD"), ("HostToHost", "HtoH"),
                        ("PeerToPeer", "PtoP")]:
        if long in name:
            return short
    m = re.search(r"(?:^| )([A-Z])to([A-Z])(?: |$)", name)
    return m.group(1) + "to" + m.group(2) if m else "other"


def loom_rows(d, groups):
    """name -> [base count, new count, base us, new us] of loom's groups."""
    rows = {}
    for g in groups:
        for r in d["names"].get(g, []):
            key = "copy " + r["name"] if g == "copies" else r["name"]
            v = rows.setdefault(key, [0, 0, 0, 0])
            v[0] += r["base"]["count"]
            v[1] += r["new"]["count"]
            v[2] += r["base"]["total_ns"] / 1000
            v[3] += r["new"]["total_ns"] / 1000
    return rows


def hta_rows(h):
    rows = {}
    for name, v in h.items():
        key = "ProfilerStep#*" if name.startswith("ProfilerStep#") else name
        if name.startswith("Memcpy"):
            key = "copy " + direction(name)
        r = rows.setdefault(key, [0, 0, 0, 0])
        for i, k in enumerate(["control_counts", "test_counts", "control_total_duration",
                               "test_total_duration"]):
            r[i] += v[k]
    return rows


def compare(label, d, hta):
    for dev, groups in [("CPU", CPU), ("GPU", GPU)]:
        lr, hr = loom_rows(d, groups), hta_rows(hta[dev])
        check(sorted(lr) == sorted(hr), f"{label} {dev}: names differ: "
              f"{sorted(set(lr) ^ set(hr))[:5]}")
        equal = sum(1 for k in hr if k in lr and lr[k] == hr[k])
        for k in hr:
            check(k not in lr or lr[k] == hr[k], f"{label} {dev} {k}: HTA {hr[k]} loom {lr.get(k)}")
        print(f"{label} {dev}: {equal} of {len(hr)} names equal HTA's figures")


def categories(d, groups):
    """HTA's counts_change_categories of loom's rows."""
    c = {}
    for g in groups:
        for r in d["names"].get(g, []):
            k = "+" if r["count_diff"] > 0 else "-" if r["count_diff"] < 0 else "="
            c[k] = c.get(k, 0) + 1
    return c


k = os.path.join(data, "kineto")
d = diff(os.path.join(k, "hta_trace_compare_base.json.gz"),
         os.path.join(k, "hta_trace_compare_test.json.gz"), "--step", "1010")
with open(os.path.join(data, "diff", "hta_trace_compare_1010.json")) as f:
    compare("trace_compare 1010", d, json.load(f))
# HTA's own test (tests/test_trace_diff.py), on loom's output
check(categories(d, CPU) == {"=": 5, "+": 3, "-": 1}, f"CPU categories {categories(d, CPU)}")
check(categories(d, GPU) == {"-": 1}, f"GPU categories {categories(d, GPU)}")
cpu = [r for g in CPU for r in d["names"].get(g, [])]
added = sorted(r["name"] for r in cpu if r["base"]["count"] == 0 and r["new"]["count"] > 0)
deleted = sorted(r["name"] for r in cpu if r["base"]["count"] > 0 and r["new"]["count"] == 0)
same = sorted(r["name"] for r in cpu if r["new"]["count"] > 0 and r["count_diff"] == 0)
check(added == ["AddmmBackward0", "All2All_Pooled_Req", "CatBackward0"], f"added {added}")
check(deleted == ["nccl:all_reduce"], f"deleted {deleted}")
check(same == ["ProfilerStep#*", "aten::as_strided", "aten::empty", "cudaEventQuery",
               "cudaLaunchKernel"], f"unchanged {same}")
summary = {r["name"]: (r["base"]["count"], r["base"]["total_ns"] // 1000) for r in cpu
           if r["base"]["count"]}
check(summary == {"ProfilerStep#*": (1, 122149), "aten::as_strided": (1, 0),
                  "aten::empty": (1, 0), "cudaEventQuery": (1, 4), "cudaLaunchKernel": (1, 4),
                  "nccl:all_reduce": (1, 67)}, f"base summary {summary}")
# loom's own side of the same diff: appeared and disappeared, the runs, one step each
check(sorted(r["name"] for r in d["appeared"]) == added, f"appeared {d['appeared']}")
check(sorted((r["group"], r["name"]) for r in d["disappeared"]) ==
      [("kernel", "void at::native::vectorized_elementwise_kernel<4, at::native::"
        "CUDAFunctor_add<int>, at::detail::Array<char*, 3> >(int, at::native::CUDAFunctor_add"
        "<int>, at::detail::Array<char*, 3>)"), ("range", "nccl:all_reduce")],
      f"disappeared {d['disappeared']}")
check(d["base"]["steps"] == 1 and d["new"]["steps"] == 1 and d["test"]["basis"] == "occurrences",
      f"runs {d['base']} {d['test']}")
check(d["regressions"] == [] and d["improvements"] == [], "one occurrence each: nothing tested")

if hta_data:
    td = os.path.join(hta_data, "trace_diff")
    d = diff(os.path.join(td, "control"), os.path.join(td, "test"), "--step", "1009")
    with open(os.path.join(data, "diff", "hta_trace_diff_first_iteration.json")) as f:
        compare("trace_diff 1009", d, json.load(f))
print("FAIL" if failures else "ok", len(failures), "differences")
sys.exit(1 if failures else 0)
