#!/usr/bin/python3
"""`loom diff` on hand-built Kineto-like traces with known answers: every
figure of the JSON document checked against the numbers the traces were
built from, the exact U test of a kernel made 2x slower, waits never
called a cause, names that appear and disappear, one step compared alone,
runs of several ranks given as folders, and the errors.

  /usr/bin/python3 synthetic.py LOOM_BIN"""
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile

loom = sys.argv[1]
failures = []
STEPS = 10


def check(cond, what):
    if not cond:
        failures.append(what)
        print("BAD:", what)


def ev(cat, name, ts, dur, pid=100, tid=1, **args):
    return {"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": tid, "ts": ts, "dur": dur,
            "args": args}


def run(path, gemm, rank=0, extra=False, old=False, phase=0, conv=0, relu=0):
    """STEPS steps of: an op, three kernels and a copy launched, a sync.
    gemm: the gemm kernel's time (us) in the first step, + 1 us a step;
    conv's is 100 + conv + step; relu's 40 + relu + 0-4 us, with ties (phase
    shifts them)."""
    evs, t, corr, want = [], 1000, 1, {}
    for i in range(STEPS):
        j = (i * 3 + phase) % 5
        k = [("gemm", gemm + i), ("relu", 40 + relu + (j + 1) % 5), ("conv", 100 + conv + i)]
        ops = [ev("cpu_op", "aten::mm", t + 10, 50 + j)]
        if old:
            ops.append(ev("cpu_op", "old_op", t + 70, 1))
        dev = t + 100
        for n, (name, dur) in enumerate(k):
            ops.append(ev("cuda_runtime", "cudaLaunchKernel", t + 80 + n * 5, 4, correlation=corr))
            evs.append(ev("kernel", name, dev, dur, pid=0, tid=7, stream=7, correlation=corr))
            want.setdefault(name, []).append(dur)
            dev += dur
            corr += 1
        ops.append(ev("cuda_runtime", "cudaMemcpyAsync", t + 90, 3, correlation=corr))
        evs.append(ev("gpu_memcpy", "Memcpy HtoD (Pageable -> Device)", dev, 20, pid=0, tid=7,
                      stream=7, correlation=corr))
        corr += 1
        dev += 20
        if extra:
            ops.append(ev("cuda_runtime", "cudaLaunchKernel", t + 95, 4, correlation=corr))
            evs.append(ev("kernel", "new_small", dev, 2, pid=0, tid=7, stream=7,
                          correlation=corr))
            corr += 1
            dev += 2
        ops.append(ev("cuda_runtime", "cudaDeviceSynchronize", t + 99, dev + 1 - (t + 99)))
        want.setdefault("sync", []).append(dev + 1 - (t + 99))
        end = dev + 10
        evs.append(ev("user_annotation", f"ProfilerStep#{i}", t, end - t))
        want.setdefault("step", []).append(end - t)
        evs.extend(ops)
        t = end + 5
    with open(path, "w") as f:
        json.dump({"distributedInfo": {"rank": rank}, "traceEvents": evs}, f)
    return want


def diff(a, b, *opts, rc=0):
    r = subprocess.run([loom, "diff", a, b, "--json", "--all", *opts], capture_output=True,
                       text=True)
    check(r.returncode == rc, f"loom diff {opts}: exit {r.returncode}: {r.stderr}")
    return json.loads(r.stdout) if rc == 0 and r.returncode == 0 else r.stderr


def rows(d, group):
    return {r["name"]: r for r in d["names"].get(group, [])}


def median(v):
    return statistics.median(v)


def mwu_exact(x, y):
    """Two-sided p of the U test by counting every split (no ties)."""
    import itertools
    allv = sorted(x + y)
    u = sum(1 for a in x for b in y if a > b)
    n = len(x)
    # U of a split: the 0-based places of x's values, less those of 0..n-1
    us = [sum(pick) - n * (n - 1) // 2 for pick in itertools.combinations(range(len(allv)), n)]
    lo = min(u, n * len(y) - u)
    return min(1, 2 * sum(1 for v in us if v <= lo) / len(us))


def mwu_normal(x, y):
    """The normal approximation with tie and continuity corrections."""
    allv = sorted(x + y)
    rank = {}
    for v in set(allv):
        idx = [i + 1 for i, w in enumerate(allv) if w == v]
        rank[v] = sum(idx) / len(idx)
    m, n, N = len(x), len(y), len(x) + len(y)
    u = sum(rank[v] for v in x) - m * (m + 1) / 2
    ties = sum(allv.count(v) ** 3 - allv.count(v) for v in set(allv))
    var = m * n / 12 * ((N + 1) - ties / (N * (N - 1)))
    z = (m * n / 2 - min(u, m * n - u) - 0.5) / math.sqrt(var)
    return math.erfc(z / math.sqrt(2))


with tempfile.TemporaryDirectory() as tmp:
    base, new = os.path.join(tmp, "base.json"), os.path.join(tmp, "new.json")
    wb = run(base, 300, old=True)
    wn = run(new, 600, extra=True, phase=2, conv=4)
    d = diff(base, new)
    # the runs
    check(d["schema"] == "loom-diff/1" and d["base"]["steps"] == STEPS and
          d["new"]["steps"] == STEPS and d["test"]["basis"] == "steps", f"runs {d['base']}")
    check(d["base"]["run_time_ns"] == sum(wb["step"]) * 1000, "base run time: its steps' time")
    check(d["base"]["step_p50_ns"] == median(wb["step"]) * 1000, "base step p50")
    check(d["new"]["step_mean_ns"] == statistics.mean(wn["step"]) * 1000, "new step mean")
    # the kernel made 2x slower: the only regression, by the exact U test
    p = 2 / math.comb(2 * STEPS, STEPS)  # every new step slower than every base step
    check([(r["group"], r["name"]) for r in d["regressions"]] == [("kernel", "gemm")],
          f"regressions {d['regressions']}")
    check(d["improvements"] == [], f"improvements {d['improvements']}")
    g = rows(d, "kernels")["gemm"]
    check(g["base"]["count"] == STEPS and g["new"]["count"] == STEPS, "gemm counts")
    check(g["base"]["total_ns"] == sum(wb["gemm"]) * 1000 and
          g["new"]["total_ns"] == sum(wn["gemm"]) * 1000, "gemm totals")
    check(g["total_diff_ns"] == (sum(wn["gemm"]) - sum(wb["gemm"])) * 1000, "gemm total diff")
    check(g["base"]["mean_ns"] == statistics.mean(wb["gemm"]) * 1000, "gemm base mean")
    check(g["base"]["p50_ns"] == median(wb["gemm"]) * 1000 and
          g["new"]["p50_ns"] == median(wn["gemm"]) * 1000, "gemm p50s")
    check(abs(g["p_value"] - p) < 1e-6 and g["verdict"] == "slower", f"gemm test {g}")
    r0 = d["regressions"][0]
    check(abs(r0["p_value"] - p) < 1e-6 and r0["test"] == "steps", f"gemm's row {r0}")
    check(r0["added_ns"] == g["total_diff_ns"], "added: the total difference (same steps)")
    check(r0["change_pct"] == round(100 * g["total_diff_ns"] / g["base"]["total_ns"], 6),
          "change_pct")
    # the typical step: interquartile mean of 10 per-step times (ranks 2.5 to 7.5)
    v = sorted(wb["gemm"])
    iqm = (0.5 * v[2] + sum(v[3:7]) + 0.5 * v[7]) / 5 * 1000
    check(abs(r0["base_typical_ns"] - iqm) < 1e-3, f"typical {r0['base_typical_ns']} {iqm}")
    relu = rows(d, "kernels")["relu"]
    check(relu["count_diff"] == 0 and relu["verdict"] == "" and relu["p_value"] is None,
          f"relu: unchanged, not tested {relu}")
    conv = rows(d, "kernels")["conv"]
    check(conv["p_value"] is None and conv["verdict"] == "", "conv: +4 us a step is too small")
    # no minimum: two names changed, conv without ties (the exact test) and
    # relu with them (the normal approximation), then Holm's correction
    b2, n2 = os.path.join(tmp, "b2.json"), os.path.join(tmp, "n2.json")
    w2b, w2n = run(b2, 300), run(n2, 300, conv=4.5, relu=3)
    da = diff(b2, n2, "--min-change", "0", "--min-share", "0")
    raw = {"conv": mwu_exact(w2b["conv"], w2n["conv"]),
           "relu": mwu_normal(w2b["relu"], w2n["relu"])}
    lo, hi = sorted(raw, key=raw.get)
    holm = {lo: min(1, 2 * raw[lo])}
    holm[hi] = min(1, max(holm[lo], raw[hi]))
    check(da["test"]["names_tested"] == 2, f"tested {da['test']}")
    for name in ("conv", "relu"):
        r = rows(da, "kernels")[name]
        check(abs(r["p_value"] - holm[name]) < 1e-6, f"{name}: p {r['p_value']} {holm[name]}")
        check(r["verdict"] == ("slower" if holm[name] < 0.01 else ""), f"{name}: verdict {r}")
    # the sync waits longer: shown with its figures, never tested
    w = rows(d, "waits")
    check(list(w) == ["cudaDeviceSynchronize"] and w["cudaDeviceSynchronize"]["p_value"] is None
          and w["cudaDeviceSynchronize"]["total_diff_ns"] ==
          (sum(wn["sync"]) - sum(wb["sync"])) * 1000, f"waits {w}")
    check("cudaDeviceSynchronize" not in rows(d, "runtime_calls"), "a sync is not a call")
    cp = rows(d, "copies")
    check(list(cp) == ["HtoD"] and cp["HtoD"]["base"]["total_ns"] == STEPS * 20000, "copies")
    # names that appear and disappear
    check([(r["group"], r["name"], r["count"], r["total_ns"]) for r in d["appeared"]] ==
          [("kernel", "new_small", STEPS, STEPS * 2000)], f"appeared {d['appeared']}")
    check([(r["group"], r["name"], r["count"]) for r in d["disappeared"]] ==
          [("op", "old_op", STEPS)], f"disappeared {d['disappeared']}")
    check(d["test"]["names_tested"] == 1, f"tested {d['test']}")
    # steps and ranks side by side
    check([s["diff_ns"] for s in d["steps"]] ==
          [(b - a) * 1000 for a, b in zip(wb["step"], wn["step"])], "steps' differences")
    check(len(d["ranks"]) == 1 and d["ranks"][0]["rank"] == 0 and
          d["ranks"][0]["base"]["work_ns"] ==
          (sum(wb["gemm"]) + sum(wb["relu"]) + sum(wb["conv"]) + STEPS * 20) * 1000,
          f"ranks {d['ranks']}")
    # one step alone: HTA's iterations
    d3 = diff(base, new, "--step", "3")
    g3 = rows(d3, "kernels")["gemm"]
    check(g3["base"]["count"] == 1 and g3["base"]["total_ns"] == wb["gemm"][3] * 1000 and
          g3["new"]["total_ns"] == wn["gemm"][3] * 1000, f"--step 3: {g3}")
    check(d3["base"]["steps"] == 1 and d3["test"]["basis"] == "occurrences", "--step 3: runs")
    d35 = diff(base, new, "--steps", "3", "5")
    check(rows(d35, "kernels")["gemm"]["new"]["total_ns"] == wn["gemm"][5] * 1000, "--steps 3 5")
    err = diff(base, new, "--step", "99", rc=1)
    check("no step numbered 99" in err, f"missing step: {err}")
    # a run against itself: nothing changed, nothing tested
    ds = diff(base, base)
    check(ds["regressions"] == [] and ds["improvements"] == [] and ds["appeared"] == [] and
          ds["test"]["names_tested"] == 0, "a run against itself")
    # two ranks a run, as folders: figures add up, the test spans both ranks' steps
    for side, gemm in [("b", 300), ("n", 600)]:
        os.mkdir(os.path.join(tmp, side))
        for r in (0, 1):
            run(os.path.join(tmp, side, f"rank{r}.json"), gemm, rank=r, phase=r)
    dr = diff(os.path.join(tmp, "b"), os.path.join(tmp, "n"))
    check(dr["base"]["ranks"] == 2 and dr["base"]["steps"] == 2 * STEPS, f"folders {dr['base']}")
    check([r["rank"] for r in dr["ranks"]] == [0, 1], "ranks paired by their rank")
    gr = rows(dr, "kernels")["gemm"]
    check(gr["base"]["count"] == 2 * STEPS and
          abs(gr["p_value"] - 2 / math.comb(4 * STEPS, 2 * STEPS)) < 1e-6,
          f"folders: gemm {gr}")
    err = diff(os.path.join(tmp, "nothing"), new, rc=1)
    check("cannot open" in err or "nothing" in err, f"missing input: {err}")
for args, want in [([], "usage: loom diff"), (["a.json"], "usage: loom diff"),
                  (["a", "b", "--alpha", "x"], "--alpha wants a number"),
                  (["a", "b", "--step", "-3"], "a step is a number"),
                  (["a", "b", "--bogus"], "unknown or incomplete option '--bogus'")]:
    r = subprocess.run([loom, "diff", *args], capture_output=True, text=True)
    check(r.returncode == 2 and want in r.stderr, f"loom diff {args}: {r.returncode} {r.stderr}")
print("FAIL" if failures else "ok", len(failures), "failures")
sys.exit(1 if failures else 0)
