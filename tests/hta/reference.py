#!/usr/bin/python3
"""Holistic Trace Analysis's figures computed with pandas, the way HTA
0.6.1 computes them (its definitions as documented in docs/report.md: GPU
events are the events with args.stream, HTA's name patterns for the kernel
types with syncs OTHER, merged intervals, the last ProfilerStep left out,
the idle-time breakdown over kernel, memcpy, memset and MTIA categories,
launch delay = max(0, GPU start - runtime end), fractional traces rounded
to whole us, start up and end down, in doubles as HTA does).  An
independent implementation for cross-checking `loom report`, which
computes the same figures in C from a streamed, sorted record pass.  Not
HTA itself (run_hta.py and compare.py run and compare the real one).

  /usr/bin/python3 reference.py TRACE   -> JSON on stdout
"""
import decimal
import gzip
import json
import math
import re
import sys

import pandas as pd

CONSECUTIVE_KERNEL_DELAY = 30000  # ns (HTA: 30 us)
RUNTIME_CUTOFF = 50000            # ns
LAUNCH_DELAY_CUTOFF = 100000      # ns
LAUNCH_NAMES = ["cudaLaunchKernel", "cudaLaunchKernelExC", "cudaMemcpyAsync", "cudaMemsetAsync",
                "runFunction - job_prep_and_submit_for_execution"]
IDLE_CATS = ["kernel", "Kernel", "gpu_memset", "Memset", "gpu_memcpy", "Memcpy", "mtia_ccp_events"]
COMM = re.compile(r"(^nccl.*)|(^hip)|(^hccl)|(.*ncclKernel.*)")
MEMORY = re.compile(r"(^(hip)?Memcpy)|(^(hip)?Memset)|(^dma)")
NOT_COMPUTE = re.compile(r"(^nccl)|(.*Memcpy)|(.*Memset)|(.*dma)|(^.*Sync)|(^Stream Wait Event)|"
                         r"(cuda.*LaunchKernel)|(^runFunction)|(^hip)|(^job_exe)|(^packet)|(^pe_exe)|"
                         r"(^cpum_exe_subgraph)|(^hccl)|(^collective_subgraph_execution)")


def load(path):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt") as f:
        d = json.load(f, parse_float=decimal.Decimal)
    # Integer nanoseconds, exactly (the traces give microseconds, some with
    # three decimals, some as 16-digit integers a double cannot scale).
    # When a timestamp is fractional HTA rounds every event to whole us: the
    # start up, the end (ts + dur, in doubles) down.
    evs = d.get("traceEvents", [])
    frac = any("ts" in e and decimal.Decimal(e["ts"]) != int(decimal.Decimal(e["ts"])) for e in evs)
    for e in evs:
        if "dur" in e:  # loom's kernel table keeps the trace's own precision
            e["dur_ns"] = int(decimal.Decimal(e["dur"]) * 1000)
        if frac and "ts" in e:
            t = float(e["ts"])
            end = t + float(e["dur"]) if "dur" in e else None
            e["ts"] = math.ceil(t) * 1000
            if end is not None:
                e["dur"] = math.floor(end) * 1000 - e["ts"]
            continue
        for k in ("ts", "dur"):
            if k in e:
                e[k] = int(decimal.Decimal(e[k]) * 1000)
    df = pd.DataFrame(d.get("traceEvents", []))
    if df.empty or "dur" not in df:
        return pd.DataFrame(columns=["ts", "dur", "cat", "name", "stream", "correlation"]), []
    df = df.dropna(subset=["dur", "cat"])
    df = df[df["cat"] != "Trace"].copy()
    df["ts"] = df["ts"].astype("int64")
    df["ts"] -= df["ts"].min()  # as HTA aligns; keeps float steps exact
    df["dur"] = df["dur"].astype("int64")
    for a in ["stream", "correlation"]:
        df[a] = df["args"].apply(lambda r: r.get(a, -1) if isinstance(r, dict) else -1)
        df[a] = pd.to_numeric(df[a], errors="coerce").fillna(-1).astype("int64")
    df["role"] = df["args"].apply(lambda r: r.get("loom_role", "") if isinstance(r, dict) else "")
    df["direction"] = df["args"].apply(lambda r: "direction" in r if isinstance(r, dict) else False)
    steps = sorted(set(n for n in df["name"] if "ProfilerStep" in str(n)))
    if len(steps) >= 2:
        cpu = df[df.stream.eq(-1)]
        gpu = df[df.stream.ne(-1)]
        last = cpu[cpu["name"].isin(steps)]["ts"].max()
        cpu = cpu[cpu.ts < last]
        gpu = gpu[gpu.correlation.isin(set(cpu.correlation))]  # (HTA also duplicates uncorrelated ones)
        df = pd.concat([gpu, cpu], axis=0)
    return df, steps


def ktype(r):
    """HTA's kernel type by name; loom's own traces add their marks."""
    n = r["name"]
    if "comm" in str(r["role"]).split(",") or r["cat"] == "collective_comm" or COMM.match(n):
        return "COMMUNICATION"
    if MEMORY.match(n) or (r["cat"] in ("gpu_memcpy", "gpu_memset") and r["direction"]):
        return "MEMORY"
    return "OTHER" if NOT_COMPUTE.match(n) else "COMPUTATION"


def merge(k):
    if k.empty:
        return pd.DataFrame(columns=["ts", "end"])
    k = k.sort_values("ts").copy()
    k["end"] = k.ts + k.dur
    k["group"] = (k.ts > k.end.shift().cummax()).cumsum()
    return k.groupby("group", as_index=False).agg({"ts": "min", "end": "max"})[["ts", "end"]]


def measure(m):
    return float((m.end - m.ts).sum()) if len(m) else 0.0


def temporal(g):
    m = merge(g)
    kt = m.iloc[-1].end - m.iloc[0].ts
    idle = kt - measure(m)
    comp = measure(merge(g[g.kt.eq("COMPUTATION")]))
    return dict(kernel_time=kt / 1000, idle_time=idle / 1000, compute_time=comp / 1000,
                non_compute_time=(kt - comp - idle) / 1000,
                idle_time_pctg=round(100 * idle / kt, 2), compute_time_pctg=round(100 * comp / kt, 2),
                non_compute_time_pctg=round(100 * (kt - comp - idle) / kt, 2))


def overlap(g):
    den = measure(merge(g[g.kt.eq("COMMUNICATION")]))
    if not den:
        return None
    both = kernel_types(g, ["COMPUTATION", "COMMUNICATION"]).get("COMPUTATION overlapping COMMUNICATION", 0)
    return round(100 * both / den, 2)


def kernel_types(g, types=("COMPUTATION", "COMMUNICATION", "MEMORY")):
    """Exclusive time per combination of kernel types, by a sweep over the
    merged intervals of each type (HTA's running sum of +bit/-bit)."""
    bits = {t: 1 << i for i, t in enumerate(types)}
    ev = []
    for t, b in bits.items():
        for _, r in merge(g[g.kt.eq(t)]).iterrows():
            ev += [(r.ts, b), (r.end, -b)]
    ev.sort(key=lambda x: x[0])
    out, run = {}, 0
    for i, (t, s) in enumerate(ev):
        run += s
        if run > 0 and i + 1 < len(ev):
            label = " overlapping ".join(k for k, b in bits.items() if run & b)
            out[label] = out.get(label, 0.0) + (ev[i + 1][0] - t)
    return {k: v for k, v in out.items() if v > 0}


def idle_breakdown(df, g):
    g = g[g.cat.isin(IDLE_CATS)]
    cpu = df[df.stream.eq(-1) & df.correlation.ne(-1)][["correlation", "ts"]]
    cpu = cpu.rename(columns={"ts": "ts_runtime"}).drop_duplicates("correlation")
    g = g.merge(cpu, on="correlation", how="left")
    out = []
    for s in g.stream.unique():
        k = g[g.stream == s].sort_values("ts", kind="stable").copy()
        k["prev_end"] = (k.ts + k.dur).shift(1)
        k["idle"] = k.ts - k.prev_end
        k["cat_"] = "other"
        hw = k.ts_runtime > k.prev_end
        k.loc[hw, "cat_"] = "host_wait"
        k.loc[~hw & (k.idle < CONSECUTIVE_KERNEL_DELAY), "cat_"] = "kernel_wait"
        for c, v in k.groupby("cat_").idle.sum().items():
            out.append(dict(stream=int(s) % (1 << 32), idle_category=c, idle_time=v / 1000))
    return out


def launch_stats(df):
    corr = set(df[df.name.isin(LAUNCH_NAMES)].correlation)
    cpu = df[df.stream.eq(-1) & df.correlation.isin(corr)][["correlation", "dur", "ts"]]
    gpu = df[df.stream.ne(-1) & df.correlation.isin(corr)][["correlation", "dur", "ts"]]
    j = pd.merge(cpu, gpu, how="inner", on="correlation")
    delay = (j.ts_y - j.ts_x - j.dur_x).clip(lower=0)
    return dict(launches=len(j), mean_delay=float(delay.mean()) / 1000 if len(j) else 0.0,
                max_delay=float(delay.max()) / 1000 if len(j) else 0.0,
                runtime_over_50us=int((j.dur_x > RUNTIME_CUTOFF).sum()),
                launch_delay_over_100us=int((delay > LAUNCH_DELAY_CUTOFF).sum()),
                short_kernels=int(((j.dur_x <= RUNTIME_CUTOFF) & (j.dur_y < j.dur_x)).sum()))


def us(x):
    if isinstance(x, dict):
        return {k: us(v) for k, v in x.items()}
    return x / 1000.0


def main(path):
    df, steps = load(path)
    g = df[df.stream.ne(-1)].copy()
    res = dict(trace=path, last_step_left_out=len(steps) >= 2, gpu_events=len(g))
    if not g.empty:
        g["kt"] = g.apply(ktype, axis=1)
        res.update(temporal_breakdown=temporal(g), comp_comm_overlap_pctg=overlap(g),
                   kernel_types=us(kernel_types(g)), idle_time_breakdown=idle_breakdown(df, g),
                   launch_stats=launch_stats(df),
                   kernel_sums={n: v / 1000 for n, v in g[g.cat.eq("kernel")].groupby("name").dur_ns.sum().items()})
    json.dump(res, sys.stdout, indent=1)


if __name__ == "__main__":
    main(sys.argv[1])
