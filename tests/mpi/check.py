#!/usr/bin/env python3
"""Checks the MPI backend (libloom-mpi.so) on tests/mpi/ring.c run by mpirun.

check.py MODE LOOM MPIRUN RING PLUGIN TESTDIR TPDIR
  basic:  4 ranks under loom record; exact records per rank (calls, peers,
          tags, bytes, requests, collective seq, Recv_complete, clock_sync),
          and trace_processor loads every trace with the same slice counts
          and no error stats.
  shift:  rank 1 recorded with LOOM_TEST_CLOCK_SHIFT=250000000:50; its sync
          offsets recover -250 ms and the 50 ppm skew.
  nompi:  the plug-in preloaded into programs that are not MPI programs (and
          into the MPI program without a session) changes nothing.
"""
import json, os, subprocess, sys, tempfile

MODE, LOOM, MPIRUN, RING, PLUGIN, TESTDIR, TPDIR = sys.argv[1:8]
N = 4
ENV = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
fails = []


def check(cond, msg):
    if not cond:
        fails.append(msg)
        print("FAIL:", msg)


def run_ranks(out, args=(), extra=None):
    env = dict(ENV, LOOM_PLUGINS=PLUGIN, LD_PRELOAD=PLUGIN, **(extra or {}))
    cmd = [MPIRUN, "-np", str(N), "--oversubscribe", "-x", "LOOM_PLUGINS", "-x", "LD_PRELOAD"]
    for k in (extra or {}):
        cmd += ["-x", k]
    cmd += [os.path.join(TESTDIR, "rank.sh"), LOOM, out, RING] + list(args)
    p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120)
    print(p.stdout, p.stderr)
    if p.returncode != 0 or "sum 70" not in p.stdout:
        sys.exit("mpirun failed (%d)" % p.returncode)
    traces = []
    for r in range(N):
        with open(os.path.join(out, "rank%d.json" % r)) as f:
            traces.append(json.load(f))
    return traces


def events(t, name=None):
    return [e for e in t["traceEvents"] if e.get("ph") in ("X", "i")
            and e.get("cat") in ("mpi", "loom") and (name is None or e["name"] == name)]


def abs_ns(t, e, end=False):
    ts = e["ts"] + (e.get("dur", 0) if end else 0)
    return t.get("baseTimeNanoseconds", 0) + round(ts * 1000)


EXPECT = {"MPI_Init": 1, "MPI_Irecv": 5, "MPI_Isend": 5, "MPI_Waitall": 5,
          "MPI_Recv_complete": 5, "MPI_Allreduce": 5, "MPI_Barrier": 5,
          "clock_sync": 2, "MPI_Finalize": 1}


# The marks each call carries (the backend's role description, loom_role in
# the file): what loom report reads instead of MPI's names.
ROLES = {"MPI_Init": "comm", "MPI_Irecv": "comm,post", "MPI_Isend": "comm,send",
         "MPI_Waitall": "comm,wait", "MPI_Recv_complete": "comm,recv", "MPI_Allreduce": "comm,nxn",
         "MPI_Barrier": "comm,barrier", "MPI_Finalize": "comm"}


def check_rank(t, r):
    counts = {}
    for e in events(t):
        counts[e["name"]] = counts.get(e["name"], 0) + 1
    check(counts == EXPECT, "rank %d: records %s, expected %s" % (r, counts, EXPECT))
    roles = {(e["name"], e.get("args", {}).get("loom_role")) for e in events(t) if e["cat"] == "mpi"}
    check(roles == set(ROLES.items()), "rank %d: marks %s, expected %s" % (r, sorted(roles), sorted(ROLES.items())))
    left, right = (r + N - 1) % N, (r + 1) % N
    irecv, isend = events(t, "MPI_Irecv"), events(t, "MPI_Isend")
    waits, done = events(t, "MPI_Waitall"), events(t, "MPI_Recv_complete")
    for s in range(min(5, len(irecv), len(isend), len(waits), len(done))):
        a = isend[s]["args"]
        check((a["dst"], a["tag"], a["bytes"], a["comm"], a["comm_size"], a["comm_rank"]) ==
              (right, 100 + s, 16 * (s + 1), 0, N, r), "rank %d step %d: Isend %s" % (r, s, a))
        a = irecv[s]["args"]
        check((a["src"], a["tag"]) == (left, 100 + s), "rank %d step %d: Irecv %s" % (r, s, a))
        d = done[s]["args"]
        check((d["src"], d["recv_tag"], d["recv_bytes"], d["comm"], d["request"]) ==
              (left, 100 + s, 16 * (s + 1), 0, a["request"]),
              "rank %d step %d: Recv_complete %s (Irecv request %s)" % (r, s, d, a["request"]))
        check(abs(abs_ns(t, done[s]) - abs_ns(t, waits[s], end=True)) <= 1000,
              "rank %d step %d: Recv_complete not at the Waitall's end" % (r, s))
        check(abs(d["wait_start_ns"] - abs_ns(t, waits[s])) <= 1000,
              "rank %d step %d: wait_start_ns %d, Waitall starts at %d" %
              (r, s, d["wait_start_ns"], abs_ns(t, waits[s])))
    seqs = {}
    for name in ("MPI_Allreduce", "MPI_Barrier"):
        for e in events(t, name):
            a = e["args"]
            check((a["comm"], a["comm_size"], a["comm_rank"]) == (0, N, r),
                  "rank %d: %s args %s" % (r, name, a))
        seqs[name] = [e["args"]["seq"] for e in events(t, name)]
        check([e["args"]["bytes"] for e in events(t, name)] ==
              [8 if name == "MPI_Allreduce" else 0] * 5, "rank %d: %s bytes" % (r, name))
    check(seqs == {"MPI_Allreduce": [0, 2, 4, 6, 8], "MPI_Barrier": [1, 3, 5, 7, 9]},
          "rank %d: collective seq %s" % (r, seqs))
    syncs = events(t, "clock_sync")
    check([e["args"]["phase"] for e in syncs] == ["init", "finalize"],
          "rank %d: clock_sync phases %s" % (r, [e["args"] for e in syncs]))
    for e in syncs:
        a = e["args"]
        check(a["reference_rank"] == 0, "rank %d: reference_rank %s" % (r, a))
        if r == 0:
            check(a["offset_ns"] == 0 and a["rtt_ns"] == 0, "rank 0: sync %s" % a)
        else:
            check(a["rtt_ns"] > 0, "rank %d: rtt %s" % (r, a))
    return syncs


def tp_check(path, t):
    names = sorted(EXPECT)
    sqls = ["select count(*) as n from slice where name = '%s'" % n for n in names]
    sqls.append("select count(*) as n from stats where value > 0 and "
                "severity in ('error','data_loss')")
    p = subprocess.run(["node", os.path.join(TESTDIR, "..", "tp", "tp.mjs"), "--tp-dir", TPDIR,
                        path] + sqls, capture_output=True, text=True, timeout=300)
    if p.returncode != 0:
        check(False, "trace_processor on %s: %s" % (path, p.stderr[-400:]))
        return
    res = [rows[0]["n"] for rows in json.loads(p.stdout)["results"]]
    print("trace_processor %s: %s" % (os.path.basename(path), res))
    check(res[:-1] == [EXPECT[n] for n in names],
          "trace_processor counts in %s: %s" % (path, dict(zip(names, res))))
    check(res[-1] == 0, "trace_processor error stats in %s: %d" % (path, res[-1]))


def basic(out):
    traces = run_ranks(out)
    for r, t in enumerate(traces):
        syncs = check_rank(t, r)
        for e in syncs if r else []:
            a = e["args"]  # one host: the true offset is 0
            check(abs(a["offset_ns"]) <= a["rtt_ns"] / 2 + 1000,
                  "rank %d: offset %d beyond rtt/2 on one host" % (r, a["offset_ns"]))
    have_tp = os.path.exists(os.path.join(TPDIR, "trace_processor.wasm"))
    if not have_tp and os.environ.get("LOOM_TP_REQUIRED"):
        check(False, "trace_processor missing in " + TPDIR)
    for r in range(N) if have_tp else []:
        tp_check(os.path.join(out, "rank%d.json" % r), traces[r])


def shift(out):
    OFF, PPM = 250000000, 50.0
    traces = run_ranks(out, ["1000"], {"LOOM_TEST_SHIFT_RANK1": "%d:%g" % (OFF, PPM)})
    for r, t in enumerate(traces):
        check_rank(t, r)
    s = {e["args"]["phase"]: (e, e["args"]) for e in events(traces[1], "clock_sync")}
    (ei, ai), (ef, af) = s["init"], s["finalize"]
    init_call = events(traces[1], "MPI_Init")[0]
    # At init: -OFF less the skew since the session started (under 2 s, so
    # under 100 us); the skew from the Init call's start on is known.
    grown = PPM * 1e-6 * (abs_ns(traces[1], ei) - abs_ns(traces[1], init_call))
    err = abs(ai["offset_ns"] + OFF + grown)
    check(err <= ai["rtt_ns"] / 2 + 100000 + 1000,
          "rank 1 init offset %d, expected -%d (rtt %d)" % (ai["offset_ns"], OFF, ai["rtt_ns"]))
    # Between the two points the offset falls by PPM of the local time passed.
    local = abs_ns(traces[1], ef) - abs_ns(traces[1], ei)
    want = -PPM * 1e-6 * local / (1 + PPM * 1e-6)
    got = af["offset_ns"] - ai["offset_ns"]
    bound = (ai["rtt_ns"] + af["rtt_ns"]) / 2 + 1000
    print("rank 1: offsets %d -> %d over %.3f s, change %d, expected %.0f +- %.0f" %
          (ai["offset_ns"], af["offset_ns"], local / 1e9, got, want, bound))
    check(abs(got - want) <= bound, "rank 1 skew: offset change %d, expected %.0f +- %.0f" %
          (got, want, bound))
    for r in (2, 3):
        for e in events(traces[r], "clock_sync"):
            check(abs(e["args"]["offset_ns"]) <= e["args"]["rtt_ns"] / 2 + 1000,
                  "rank %d (not shifted): offset %s" % (r, e["args"]))
    # The whole of rank 1's timeline moved: its barriers end 250 ms later.
    d = sorted(abs_ns(traces[1], a, True) - abs_ns(traces[0], b, True)
               for a, b in zip(events(traces[1], "MPI_Barrier"), events(traces[0], "MPI_Barrier")))
    check(abs(d[len(d) // 2] - OFF) < 5000000, "rank 1 barriers end %s ns after rank 0's" % d)


def nompi(out):
    env = dict(ENV, LD_PRELOAD=PLUGIN)
    check(subprocess.run(["/bin/true"], env=env).returncode == 0, "/bin/true with the preload")
    p = subprocess.run(["python3", "-c", "import sys; print(sum(range(10)))"], env=env,
                       capture_output=True, text=True)
    check(p.returncode == 0 and p.stdout == "45\n", "python3 with the preload: %r" % (p,))
    p = subprocess.run(["sh", "-c", "echo $((6*7))"], env=dict(env, LD_BIND_NOW="1"),
                       capture_output=True, text=True)
    check(p.returncode == 0 and p.stdout == "42\n", "sh with the preload (bind now): %r" % (p,))
    # Under loom record, with a session that asks for "mpi", a non-MPI program.
    trace = os.path.join(out, "sh.json")
    p = subprocess.run([LOOM, "record", "--devices", "cpu,mpi", "-o", trace, "--", "sh", "-c",
                        "echo ok"], env=dict(env, LOOM_PLUGINS=PLUGIN), capture_output=True,
                       text=True)
    check(p.returncode == 0 and p.stdout == "ok\n", "loom record sh: %r" % (p,))
    if os.path.exists(trace):
        with open(trace) as f:
            check(events(json.load(f)) == [], "a non-MPI program recorded MPI events")
    # The MPI program with the plug-in but no loom in the process.
    p = subprocess.run([MPIRUN, "-np", str(N), "--oversubscribe", "-x", "LD_PRELOAD", RING],
                       env=env, capture_output=True, text=True, timeout=120)
    check(p.returncode == 0 and "sum 70" in p.stdout, "ring without loom: %r" % (p,))
    # No undefined reference to libmpi that is not weak.
    p = subprocess.run(["nm", "-D", "--undefined-only", PLUGIN], capture_output=True, text=True)
    strong = [l for l in p.stdout.splitlines() if " U " in l and "@" not in l]
    check(p.returncode == 0 and strong == [], "strong undefined symbols: %s" % strong)


with tempfile.TemporaryDirectory(prefix="loom-mpi-") as out:
    {"basic": basic, "shift": shift, "nompi": nompi}[MODE](out)
print("%d failure(s)" % len(fails))
sys.exit(1 if fails else 0)
