"""e2e.py LOOM MPIEXEC RING TP_DIR - the 4-rank ring (tests/mpi/ring.c; rank 2
sleeps 50 ms in a user range "late" before step 3's exchange) recorded as ONE
job: `loom record -o t.json -- mpirun -np 4 ring`.

The merged trace holds the 4 ranks and 20 message flows (5 steps x 4 ring
messages) with zero trace_processor errors, and `loom report --json` on it:
  - matches all 20 messages and 10 collective instances;
  - finds rank 2 the straggler of step 3 (the root cause: rank 3 entered the
    allreduce last only because it waited for rank 2's message);
  - ranks 0, 1 and 3 each waited for rank 2 in step 3 as long as rank 2 was
    late, within 5 ms (Late Sender on rank 3, Wait at N x N on 0 and 1);
  - no wait state above the noise threshold (1 ms) in steps 1, 2 and 4.
Step 0 holds each pair of ranks' first message, for which the MPI library
sets up the connection then: on this project's 2-core VMs ranks 1 and 2
waited 1.1-2.6 ms in step 0 in most runs, the same with the loom of
e67096f as with today's, a real wait that no step after it has.
"As long as rank 2 was late" is the "late" range as recorded: nanosleep(50 ms)
takes 50 ms plus however long the kernel takes to run rank 2 again, which on
2 shared cores with other work is up to several ms.  4 ranks on 2 cores also
preempt each other: a rank set aside for a scheduler tick (4 ms here) makes
the others wait that long, for real, where the program caused nothing.  The
report charges such a wait to the rank that was set aside, so the figures
above do not move; but a tick can land outside step 3, above the threshold.
The timing checks are therefore tried on up to 3 runs (each failure printed);
the counts and the straggler must hold on every run."""
import json, os, subprocess, sys, tempfile

loom, mpiexec, ring, tp_dir = sys.argv[1:5]
MS = 1e6
env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
fails = []


def check(what, ok, hard=True):
    print(("ok   " if ok else "FAIL ") + what)
    if not ok:
        fails.append((what, hard))


def tp(trace, sql):
    tpjs = os.path.join(os.path.dirname(__file__), "..", "tp", "tp.mjs")
    out = subprocess.run(["node", tpjs, "--tp-dir", tp_dir, trace, sql], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    rows = json.loads(out.stdout)["results"][0]
    return list(rows[0].values())[0] if rows else None


def rows_of(rep, key):
    return rep["tables"][key]["rows"]


def attempt():
    work = tempfile.mkdtemp()
    trace = os.path.join(work, "t.json")
    r = subprocess.run([loom, "record", "-o", trace, "--", mpiexec, "--oversubscribe", "-np", "4", ring],
                       env=env, capture_output=True, text=True, timeout=240)
    print(r.stdout + r.stderr)
    assert r.returncode == 0, "loom record failed"
    assert "sum 70" in r.stdout + r.stderr, "the program's output changed"
    if os.path.isdir(tp_dir):
        check("20 flows between ranks", tp(trace, "select count(*) as n from flow") == 20)
        check("4 ranks with MPI calls", tp(trace, "select count(distinct upid) as n from slice join thread_track tt "
                                                  "on slice.track_id = tt.id join thread using(utid) "
                                                  "where category = 'mpi'") == 4)
        check("no trace_processor errors", tp(trace, "select count(*) as n from stats where value > 0 and "
                                                     "severity in ('error','data_loss')") == 0)
    flows = [e for e in json.load(open(trace))["traceEvents"] if e.get("ph") in ("s", "f")]
    check("40 flow ends, all mpi_message", len(flows) == 40 and all(e["cat"] == "mpi_message" for e in flows))
    out = subprocess.run([loom, "report", "--json", "--all", trace], capture_output=True, text=True, check=True)
    full = json.loads(out.stdout)
    rep = full["ranks"]
    check("4 ranks", rep["count"] == 4)
    check("20 messages matched, none unmatched",
          (rep["messages"], rep["unmatched_sends"], rep["unmatched_receives"]) == (20, 0, 0))
    check("10 collective instances", rep["collective_instances"] == 10)
    check("no category left not understood", full["not_understood"]["categories"] == [])
    threshold = rep["wait_threshold_ns"]
    check("noise threshold 1 ms", threshold == 1e6)
    late = [e["dur"] * 1e3 for e in json.load(open(trace))["traceEvents"] if e.get("name") == "late"]
    check("rank 2's late range recorded once", len(late) == 1)
    late = late[0] if late else 50 * MS
    print("rank 2 was late %.3f ms (nanosleep of 50 ms)" % (late / MS))
    check("the sleep took at least 50 ms", late >= 50 * MS)
    steps = {r["step"]: r for r in rows_of(rep, "steps")}
    check("steps 0..4", set(range(5)) <= set(steps))
    check("rank 2 is the straggler of step 3", steps.get(3, {}).get("straggler") == 2)
    check("rank 2 set the pace", rep["pace_rank"] == 2)
    check("the slowest step is 3 (the tail that MPI_Finalize ends is no step)",
          rep["slowest_step"] == 3 and 5 not in steps)
    waited_for = {(r["step"], r["rank"], r["waited_for"]): r["waiting_ns"] for r in rows_of(rep, "waits_for")}
    for k in (0, 1, 3):
        w = waited_for.get((3, k, 2), 0)
        print("rank %d waited for rank 2 in step 3: %.3f ms" % (k, w / MS))
        check("rank %d waited for rank 2 as long as it was late, within 5 ms" % k, abs(w - late) <= 5 * MS, False)
    ranks = {r["rank"]: r for r in rows_of(rep, "ranks")}
    check("rank 3's Late Sender, ranks 0 and 1's Wait at N x N: at least rank 2's delay - 5 ms",
          ranks[3]["late_sender_ns"] >= late - 5 * MS and
          all(ranks[k]["wait_nxn_ns"] >= late - 5 * MS for k in (0, 1)), False)
    noisy = [r for r in rows_of(rep, "rank_steps") if r["step"] not in (0, 3) and r["waiting_ns"] > 0]
    for r in noisy:
        print("scheduler noise? rank %d step %d waited %.3f ms" % (r["rank"], r["step"], r["waiting_ns"] / MS))
    check("no wait state above the threshold in steps 1, 2 and 4", not noisy, False)
    check("no one waited for anyone in steps 1, 2 and 4", all(s in (0, 3) for s, _, _ in waited_for), False)


for run in range(3):
    fails.clear()
    attempt()
    if not fails or any(hard for _, hard in fails):
        break
    print("run %d: timing checks failed (%s); running the job again" % (run + 1, "; ".join(w for w, _ in fails)))
sys.exit(1 if fails else 0)
