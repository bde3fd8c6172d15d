#!/usr/bin/python3
"""Holistic Trace Analysis's figures computed with pandas, the way HTA
computes them (its definitions as documented in docs/report.md: GPU events
are the events with args.stream, merged intervals, the last ProfilerStep left
out, host_wait / kernel_wait / other, launch delay = GPU start - runtime start
+ runtime duration).  An independent implementation for cross-checking
`loom report`, which computes the same figures in C from a streamed, sorted
record pass.  Not HTA itself: HTA is not packaged for Debian.

  /usr/bin/python3 reference.py TRACE   -> JSON on stdout
"""
import decimal
import gzip
import json
import sys

import pandas as pd

CONSECUTIVE_KERNEL_DELAY = 30000  # ns (HTA: 30 us)
RUNTIME_CUTOFF = 50000            # ns
LAUNCH_DELAY_CUTOFF = 100000      # ns
LAUNCH_NAMES = ["cudaLaunchKernel", "cudaLaunchKernelExC", "cudaMemcpyAsync", "cudaMemsetAsync"]


def load(path):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt") as f:
        d = json.load(f, parse_float=decimal.Decimal)
    # Integer nanoseconds, exactly (the traces give microseconds, some with
    # three decimals, some as 16-digit integers a double cannot scale).
    for e in d.get("traceEvents", []):
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
    steps = sorted(set(n for n in df["name"] if "ProfilerStep" in str(n)))
    if len(steps) >= 2:
        cpu = df[df.stream.eq(-1)]
        gpu = df[df.stream.ne(-1)]
        last = cpu[cpu["name"].isin(steps)]["ts"].max()
        cpu = cpu[cpu.ts < last]
        gpu = gpu[gpu.correlation.isin(set(cpu.correlation))]  # (HTA also duplicates uncorrelated ones)
        df = pd.concat([gpu, cpu], axis=0)
    return df, steps


def ktype(n):
    if n.startswith("nccl") or "gloo:" in n:
        return "COMMUNICATION"
    if "Memcpy" in n or "Memset" in n:
        return "MEMORY"
    return "COMPUTATION"


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
    delay = j.ts_y - j.ts_x + j.dur_x
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
        g["kt"] = g.name.apply(ktype)
        res.update(temporal_breakdown=temporal(g), comp_comm_overlap_pctg=overlap(g),
                   kernel_types=us(kernel_types(g)), idle_time_breakdown=idle_breakdown(df, g),
                   launch_stats=launch_stats(df),
                   kernel_sums={n: v / 1000 for n, v in g[g.cat.eq("kernel")].groupby("name").dur.sum().items()})
    json.dump(res, sys.stdout, indent=1)


if __name__ == "__main__":
    main(sys.argv[1])
