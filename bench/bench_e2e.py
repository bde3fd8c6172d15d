#!/usr/bin/python3
"""bench_e2e.py - what loom costs a whole program, as its user sees it: the
wall time of the command, from its start to its exit (loom's start, the
program, its trace written), against the same program run plain, all in
the same run.  A benchmark, run by hand, never a test:

  /usr/bin/python3 bench/bench_e2e.py [--seconds S] [--rounds R]
        [--only torch|opencl] [--loom-bin PATH] [--batch B] [--batches N]
        [--floor SO]

Programs:
  torch   bench/e2e_train.py: a small Conv2d/Linear network trained with SGD
          on one thread (torch.set_num_threads(1)), batches of B images
          (default 8); its step count is calibrated once, plain, so that the
          plain run's training loop lasts about S seconds (default 10), and
          every configuration then runs that same number of steps.
  opencl  the bundled OpenCL pipeline, `loom-opencl-pipeline N` (default 24,
          README's first command; next to the loom binary, examples/).
Configurations, each program's in R interleaved rounds (default 7; each
round in its own shuffled order, so that no configuration always follows
another), every run a fresh process:
  plain               the program alone
  loom                loom record -o T.json (its default devices)
  loom --ring 64m     the same, as a flight recorder
  loom + perf         loom record --devices D,perf: the default devices and
                      CPU sampling at its default rate (D: cpu for torch,
                      whose ops are device type cpu; cpu,opencl for OpenCL);
                      skipped, with a line saying so, where this process may
                      not open a sampling perf event
  torch.profiler      (torch only) the program profiling itself with
                      torch.profiler, record_shapes off, and
  torch.profiler, shapes  the same with record_shapes=True.
  floor               (torch only) the floor under any observer of ops: the
                      program with an empty global RecordFunction callback
                      asking for the ops' inputs (bench_rf_floor.so beside
                      loom's build, bench/; --floor SO), what PyTorch itself
                      costs once anything observes its ops; skipped, with a
                      line saying so, when the library is not built.
Every configuration that records writes its trace, and that is part of its
time: loom record writes T.json after the program, the profiled program
calls export_chrome_trace before it exits.  Printed per configuration: min
and median of the whole command's wall time, the ratio to plain (the
median, and the min, of the per-round ratios: each run over the same
round's plain run), the same ratio for the command's CPU time (user + sys
of it and its children: steadier on a loaded machine), for torch the
training loop's own wall time as the program measured it (no start-up, no
trace export), and each run's recorded events (loom's summary; the
profiler's event count).  Then one line per goal of issue 38:
  goal NAME: FIGURE (target TARGET) met|missed
"""
import argparse
import ctypes
import os
import random
import re
import resource
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
PY = "/usr/bin/python3"  # Debian's python3-torch is for this one
TRAIN = os.path.join(HERE, "e2e_train.py")
SUMMARY = re.compile(r"^loom: .*: (\d+) events, .* (\d+) dropped, (\d+) warnings?", re.M)


def default_loom():
    if os.environ.get("LOOM_BIN"):
        return os.environ["LOOM_BIN"]
    for d in ("build", "build-h"):
        p = os.path.join(HERE, "..", d, "loom")
        if os.path.exists(p):
            return os.path.abspath(p)
    return "/work/main/build/loom"


def perf_permitted():
    """Whether this process may open a user-space cpu-clock sampling event on
    itself, as loom's perf backend does; the reason when not."""
    attr = (ctypes.c_uint8 * 128)()
    ctypes.c_uint32.from_buffer(attr, 0).value = 1  # PERF_TYPE_SOFTWARE
    ctypes.c_uint32.from_buffer(attr, 4).value = 128  # size
    ctypes.c_uint64.from_buffer(attr, 8).value = 0  # PERF_COUNT_SW_CPU_CLOCK
    ctypes.c_uint64.from_buffer(attr, 16).value = 1000  # sample_freq
    # flags: disabled (bit 0), exclude_kernel (5), exclude_hv (6), freq (10)
    ctypes.c_uint64.from_buffer(attr, 40).value = 1 | 1 << 5 | 1 << 6 | 1 << 10
    libc = ctypes.CDLL(None, use_errno=True)
    fd = libc.syscall(298, ctypes.byref(attr), 0, -1, -1, 0)  # x86-64 perf_event_open
    if fd < 0:
        err = ctypes.get_errno()
        return False, "perf_event_open: %s (kernel.perf_event_paranoid=%s)" % (
            os.strerror(err), open("/proc/sys/kernel/perf_event_paranoid").read().strip())
    os.close(fd)
    return True, None


class Runner:
    """Runs a command; its wall time, and its CPU time with its children's
    (RUSAGE_CHILDREN: each command is waited for before the next starts)."""

    def __call__(self, cmd):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        t0 = time.perf_counter()
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        wall = time.perf_counter() - t0
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
        if p.returncode:
            sys.exit("failed (%d): %s\n%s%s" % (p.returncode, " ".join(cmd), p.stdout, p.stderr))
        return {"wall": wall, "cpu": cpu, "out": p.stdout, "err": p.stderr}


def loom_events(r, cmd):
    m = SUMMARY.search(r["err"])
    if not m:
        sys.exit("no loom summary from: %s\n%s" % (" ".join(cmd), r["err"]))
    return int(m.group(1)), int(m.group(2)), int(m.group(3))


def configs(prog, loom, tmp, perf_devices, perf_ok):
    """[(name, function running one round's run -> result dict)]"""
    runner = Runner()
    trace = os.path.join(tmp, "t.json")

    def plain():
        return runner(prog)

    def looms(extra):
        def f():
            cmd = [loom, "record", "-o", trace] + extra + ["--"] + prog
            r = runner(cmd)
            r["events"], r["dropped"], r["warnings"] = loom_events(r, cmd)
            os.unlink(trace)
            return r
        return f

    out = [("plain", plain), ("loom", looms([])), ("loom --ring 64m", looms(["--ring", "64m"]))]
    if perf_ok:
        out.append(("loom + perf", looms(["--devices", perf_devices])))
    return out, runner, trace


def calibrate(runner, seconds, batch):
    """Steps for a plain training loop of about `seconds`."""
    steps = 20
    while True:
        r = runner([PY, TRAIN, str(steps), "--batch", str(batch)])
        loop = float(r["out"].split()[1])
        if loop >= min(1.0, seconds / 2):
            return max(1, int(steps * seconds / loop))
        steps *= 4


def torch_configs(a, loom, tmp, perf_ok):
    runner = Runner()
    steps = calibrate(runner, a.seconds, a.batch)
    prog = [PY, TRAIN, str(steps), "--batch", str(a.batch)]
    ways, runner, trace = configs(prog, loom, tmp, "cpu,perf", perf_ok)
    floor = a.floor or os.path.join(os.path.dirname(loom), "bench", "bench_rf_floor.so")
    if os.path.exists(floor):
        ways.append(("floor", lambda: runner(prog + ["--floor", floor])))
    else:
        print("floor: skipped: no %s (cmake --build BUILD --target bench_rf_floor, or --floor SO)"
              % floor)

    def profiler(mode):
        def f():
            r = runner(prog + ["--profile", mode, "--trace", trace])
            r["events"] = int(re.search(r"profiler_events (\d+)", r["out"]).group(1))
            os.unlink(trace)
            return r
        return f

    ways += [("torch.profiler", profiler("on")), ("torch.profiler, shapes", profiler("shapes"))]
    return steps, prog, ways


def summarize(title, ways, res):
    print("\n%s: %d rounds" % (title, len(res["plain"])))
    print("%-24s %8s %8s %8s %8s %8s %8s %9s %10s" % (
        "", "wall min", "median", "ratio", "(min)", "cpu s", "ratio", "loop s", "events"))
    ratios = {}
    for name, _ in ways:
        v = res[name]
        wall = [r["wall"] for r in v]
        rr = [r["wall"] / p["wall"] for r, p in zip(v, res["plain"])]
        cr = [r["cpu"] / p["cpu"] for r, p in zip(v, res["plain"])]
        ratios[name] = statistics.median(rr)
        loop = [float(r["out"].split("loop_s ")[1].split()[0]) for r in v if "loop_s " in r["out"]]
        ev = [r["events"] for r in v if "events" in r]
        print("%-24s %8.3f %8.3f %8.4f %8.4f %8.3f %8.4f %9s %10s" % (
            name, min(wall), statistics.median(wall), ratios[name], min(rr),
            statistics.median(r["cpu"] for r in v), statistics.median(cr),
            "%.3f" % statistics.median(loop) if loop else "-",
            "%d" % statistics.median(ev) if ev else "-"))
        drops = sum(r.get("dropped", 0) for r in v)
        warns = sum(r.get("warnings", 0) for r in v)
        if drops or warns:
            print("%-24s   (loom summaries: %d dropped, %d warnings over the rounds)"
                  % ("", drops, warns))
    return ratios


def goal(name, figure, target, met, fmt="%.4f"):
    print("goal %s: %s (target %s) %s" % (name, fmt % figure, target, "met" if met else "missed"))


def bench(title, ways, rounds):
    res = {n: [] for n, _ in ways}
    for i in range(rounds):
        order = ways[:]
        random.Random(i).shuffle(order)
        for name, fn in order:
            res[name].append(fn())
        print("round %d: %s" % (i + 1, ", ".join(
            "%s %.3f s" % (n, res[n][-1]["wall"]) for n, _ in ways)), flush=True)
    return summarize(title, ways, res), res


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--only", choices=("torch", "opencl"))
    ap.add_argument("--loom-bin", default=default_loom())
    ap.add_argument("--batch", type=int, default=8, help="torch: images per batch")
    ap.add_argument("--batches", type=int, default=24, help="opencl: the pipeline's batches")
    ap.add_argument("--pipeline", help="default: examples/loom-opencl-pipeline beside loom")
    ap.add_argument("--floor", help="torch: default bench/bench_rf_floor.so beside loom")
    a = ap.parse_args()
    loom = os.path.abspath(a.loom_bin)
    if not os.access(loom, os.X_OK):
        sys.exit("no loom at %s: build it (cmake --build build --target loom_cli) or give "
                 "--loom-bin" % loom)
    perf_ok, why = perf_permitted()
    tmp = tempfile.mkdtemp(prefix="bench_e2e.")
    print("loom: %s; %d rounds; load average %s" % (
        loom, a.rounds, " ".join("%.1f" % x for x in os.getloadavg())))
    if not perf_ok:
        print("loom + perf: skipped: this process may not sample itself (%s)" % why)
    goals = []
    if a.only in (None, "torch"):
        steps, prog, ways = torch_configs(a, loom, tmp, perf_ok)
        print("torch: %s (calibrated: %d steps for ~%.0f s of training loop)"
              % (" ".join(prog), steps, a.seconds), flush=True)
        t, res = bench("torch: whole command wall time, s", ways, a.rounds)
        loop = statistics.median(float(r["out"].split()[1]) for r in res["plain"])
        ev = statistics.median(r["events"] for r in res["torch.profiler"])
        print("plain training loop: %.3f ms per step; torch.profiler: %.0f events per step, "
              "so %.1f us of plain loop per event" % (loop * 1e3 / steps, ev / (steps + 5),
                                                     loop * 1e6 / steps / (ev / (steps + 5))))
        goals += [("e2e_torch_default", t["loom"], "1.03", 1.03),
                  ("e2e_torch_ring", t["loom --ring 64m"], "1.02", 1.02)]
        if perf_ok:
            goals.append(("e2e_torch_perf", t["loom + perf"], "1.05", 1.05))
        vs = (t["loom"], t["torch.profiler"], t["torch.profiler, shapes"])
        if "floor" in t:
            print("floor (an empty RecordFunction callback with inputs) %.4f of plain: loom %.4f, "
                  "--ring 64m %.4f of the floor" % (t["floor"], t["loom"] / t["floor"],
                                                     t["loom --ring 64m"] / t["floor"]))
    if a.only in (None, "opencl"):
        pipe = a.pipeline or os.path.join(os.path.dirname(loom), "examples",
                                          "loom-opencl-pipeline")
        if not os.access(pipe, os.X_OK):
            sys.exit("no %s: build it (--target loom-opencl-pipeline) or give --pipeline" % pipe)
        prog = [pipe, str(a.batches)]
        ways, _, _ = configs(prog, loom, tmp, "cpu,opencl,perf", perf_ok)
        print("\nopencl: %s" % " ".join(prog), flush=True)
        o, _ = bench("opencl: whole command wall time, s", ways, a.rounds)
        goals += [("e2e_opencl_default", o["loom"], "1.03", 1.03),
                  ("e2e_opencl_ring", o["loom --ring 64m"], "1.02", 1.02)]
        if perf_ok:
            goals.append(("e2e_opencl_perf", o["loom + perf"], "1.05", 1.05))
    os.rmdir(tmp)
    print("\nratios: median of the per-round ratios of whole-command wall time to plain")
    for name, fig, target, lim in goals:
        goal(name, fig, target, fig <= lim)
    if not perf_ok:
        print("(e2e_torch_perf, e2e_opencl_perf: not measured, perf sampling not permitted)")
    if a.only in (None, "torch"):
        l, p, s = vs
        goal("e2e_torch_vs_profiler", l - 1,
             "below torch.profiler's %+.4f and %+.4f with shapes" % (p - 1, s - 1),
             l < p and l < s, "%+.4f")


if __name__ == "__main__":
    main()
