"""Critical path and bound of `loom report` (docs/report.md, "Critical path", "Bound").

  check.py LOOM_CLI TESTS_DIR

Hand-built traces with a path worked out by hand (times in us, each step's figures in the
comments): a launch-bound step, a step bound by a copy on a second queue (a device sync,
then a cross-queue wait), a sync-bound step, a rank that waits for a late rank (two rank
traces, and the same merged), windows of a trace without steps; then HTA's simple_add trace
against HTA's own overlaid critical-path trace (tests/data/critpath, MIT, LICENSE-hta),
every difference counted by its documented reason; then the --critical-path-trace output
in trace_processor (exact marked slices and flows, no error the input lacked).
Exit 0, 1 on a failure, 77 when trace_processor is missing (its checks only)."""
import gzip
import json
import os
import shutil
import subprocess
import sys
import tempfile

LOOM, TESTS = sys.argv[1], sys.argv[2]
TMP = tempfile.mkdtemp(prefix="loom-critpath-")
failed = []
US = 1000


def expect(what, ok, got=""):
    if not ok:
        failed.append(what)
        print(f"FAIL {what}: {got}")


def write(name, events, meta=None):
    path = os.path.join(TMP, name)
    doc = {"schemaVersion": 1, "traceEvents": events}
    if meta:
        doc.update(meta)
    with open(path, "w") as f:
        json.dump(doc, f)
    return path


def x(cat, name, ts, dur, pid=100, tid=1, **args):
    e = {"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": tid, "ts": ts, "dur": dur}
    if args:
        e["args"] = args
    return e


def proc(pid, name):
    return {"ph": "M", "name": "process_name", "pid": pid, "args": {"name": name}}


def report(*paths, extra=()):
    out = os.path.join(TMP, "r.json")
    subprocess.run([LOOM, "report", *paths, "--json", "-o", out, "--all", *extra], check=True)
    with open(out) as f:
        return json.load(f)["critical_path"]


def step_row(cp, i=0):
    return cp["steps"]["rows"][i] if isinstance(cp["steps"], dict) else cp["steps"][i]


def rows(t):
    return t["rows"] if isinstance(t, dict) else t


def check_step(what, cp, length, classes, bound, on_path, events):
    s = step_row(cp)
    expect(f"{what}: length", s["length_ns"] == length * US, s["length_ns"])
    for k, v in classes.items():
        expect(f"{what}: {k}", s[k + "_ns"] == v * US, s[k + "_ns"])
    expect(f"{what}: bound", s["bound"] == bound, s["bound"])
    expect(f"{what}: events on path", s["on_path"] == on_path, s["on_path"])
    expect(f"{what}: events", s["events"] == events, s["events"])
    return s


def launch_bound():
    """Step [0, 100]: 10 x (op [10i, 10i+8] holding launch [10i+1, 10i+7], kernel [10i+6,
    10i+7]).  Each kernel ends as its launch call returns, so the call's end waits for it
    (a blocking call, docs/report.md): per op 5 us of launch (call start -> kernel start),
    1 us compute, 0 sync, 2 us op self, 2 us between ops (the step's own time).  Launch
    still outweighs compute 5 to 1: launch-bound, every kernel on the path."""
    ev = [proc(100, "app"), proc(0, "GPU 0"), x("user_annotation", "ProfilerStep#1", 0, 100)]
    for i in range(10):
        t = 10 * i
        ev.append(x("cpu_op", "op", t, 8))
        ev.append(x("x_runtime", "xLaunch", t + 1, 6, correlation=i + 1, loom_role="launch"))
        ev.append(x("kernel", "tiny", t + 6, 1, pid=0, tid=7, correlation=i + 1))
    cp = report(write("launch.json", ev))
    check_step("launch-bound", cp, 100, {"host": 40, "launch": 50, "compute": 10, "sync": 0},
               "launch-bound", 31, 31)
    ev = step_row(cp)["evidence"]
    expect("launch-bound: evidence", ev == "launch 50.0% of the path, most in xLaunch (10, 0.050 ms)"
           "; device busy 10.0% of the step; 10 kernels of 1.000 us on average", ev)
    tiny = [r for r in rows(cp["on_path"]) if r["name"] == "tiny"]
    expect("launch-bound: kernels on the path", tiny and (tiny[0]["on_path"], tiny[0]["off_path"],
           tiny[0]["class"]) == (10, 0, "compute"), tiny)


def copy_bound():
    """Step [0, 160]: xLaunch [10, 15] -> kernel [20, 50] on queue 7; xMemcpyAsync [16, 20]
    -> copy [22, 150] on queue 8; xDeviceSynchronize [25, 155] with its sync record on
    the device (a track without work: every queue).  Path back from the step's end: 5
    host, sync 5 (copy end -> sync end), copy 128, launch 6 (call start -> copy start), 1
    host, launch 5, 10 host.  The kernel is off the path with 110 us of slack."""
    ev = [proc(100, "app"), proc(0, "GPU 0"), x("user_annotation", "ProfilerStep#1", 0, 160),
          x("x_runtime", "xLaunch", 10, 5, correlation=1, loom_role="launch"),
          x("kernel", "k", 20, 30, pid=0, tid=7, correlation=1),
          x("x_runtime", "xMemcpyAsync", 16, 4, correlation=2, loom_role="memory"),
          x("gpu_memcpy", "copy HtoD", 22, 128, pid=0, tid=8, correlation=2, direction="HtoD"),
          x("x_runtime", "xDeviceSynchronize", 25, 130, correlation=3),
          x("x_sync", "device sync", 25, 130, pid=0, tid=0, correlation=3)]
    cp = report(write("copy.json", ev))
    check_step("transfer-bound", cp, 160,
               {"host": 16, "launch": 11, "copy": 128, "sync": 5, "compute": 0},
               "transfer-bound", 5, 6)
    k = [r for r in rows(cp["slack"]) if r["name"] == "k"]
    expect("transfer-bound: kernel slack", k and k[0]["min_slack_ns"] == 110 * US, k)
    ev_rows = rows(cp["evidence"])
    expect("transfer-bound: evidence", ev_rows and ev_rows[0]["name"] == "copy HtoD" and
           ev_rows[0]["time_ns"] == 128 * US, ev_rows)


def cross_queue():
    """Step [0, 160]: xMemcpyAsync [10, 14] -> copy [15, 120] on queue 8; a cross-queue wait
    recorded on queue 7 at 17 (wait_on_stream 8, its call [15, 16]); xLaunch [20, 25] ->
    kernel [121, 150] on queue 7; xDeviceSynchronize [30, 155].  Path: 5 host, sync 5
    (kernel end -> sync end), compute 29, sync 1 (copy end -> kernel start, the cross-queue
    wait), copy 105, launch 5, 10 host."""
    ev = [proc(100, "app"), proc(0, "GPU 0"), x("user_annotation", "ProfilerStep#1", 0, 160),
          x("x_runtime", "xMemcpyAsync", 10, 4, correlation=1, loom_role="memory"),
          x("gpu_memcpy", "copy HtoD", 15, 105, pid=0, tid=8, correlation=1, direction="HtoD"),
          x("x_runtime", "xStreamWaitEvent", 15, 1, correlation=2),
          x("x_sync", "wait event", 17, 0, pid=0, tid=7, correlation=2, wait_on_stream=8),
          x("x_runtime", "xLaunch", 20, 5, correlation=3, loom_role="launch"),
          x("kernel", "k", 121, 29, pid=0, tid=7, correlation=3),
          x("x_runtime", "xDeviceSynchronize", 30, 125, correlation=4),
          x("x_sync", "device sync", 30, 125, pid=0, tid=0, correlation=4)]
    cp = report(write("xqueue.json", ev))
    check_step("cross-queue", cp, 160,
               {"host": 15, "launch": 5, "copy": 105, "sync": 6, "compute": 29},
               "transfer-bound", 5, 7)


def sync_bound():
    """Step [0, 100]: xLaunch [5, 10] -> kernel [12, 20]; a host sync call [30, 90] that the
    trace shows no device work for (the kernel ended before it began).  Path: 10 host
    (sync end -> step end), sync 60, 20 host, launch 5, 5 host."""
    ev = [proc(100, "app"), proc(0, "GPU 0"), x("user_annotation", "ProfilerStep#1", 0, 100),
          x("x_runtime", "xLaunch", 5, 5, correlation=1, loom_role="launch"),
          x("kernel", "k", 12, 8, pid=0, tid=7, correlation=1),
          x("x_sync", "xStreamSynchronize", 30, 60)]
    cp = report(write("sync.json", ev))
    check_step("sync-bound", cp, 100, {"host": 35, "launch": 5, "sync": 60, "compute": 0},
               "sync-bound", 3, 4)


def blocking():
    """A runtime that runs device work inside the call that enqueued it (a CPU device, a
    blocking copy).  Step [0, 120]: op [5, 95] holding xLaunch [10, 90] -> gemm [15, 85]
    on queue 7 (inside its call) and xLaunch [91, 93] -> relu [94, 99] (after its call);
    xReadBuffer [100, 115] -> copy DtoH [102, 112] on queue 8 (inside its call).  Path back
    from the step's end: 5 host (step), sync 3 (copy end -> read end), copy 10, launch 2
    (read start -> copy start), 5 host (op end -> read start), 2 host (op), launch 2 (the
    second xLaunch), 1 host (op), sync 5 (gemm end -> call end), compute 70, launch 5
    (call start -> gemm start), 5 host (op), 5 host (step): compute-bound.  relu ended after its call
    returned: nothing waited for it, off the path with 21 us of slack."""
    ev = [proc(100, "app"), proc(0, "GPU 0"), x("user_annotation", "ProfilerStep#1", 0, 120),
          x("cpu_op", "forward", 5, 90),
          x("x_runtime", "xLaunch", 10, 80, correlation=1, loom_role="launch"),
          x("kernel", "gemm", 15, 70, pid=0, tid=7, correlation=1),
          x("x_runtime", "xLaunch", 91, 2, correlation=2, loom_role="launch"),
          x("kernel", "relu", 94, 5, pid=0, tid=7, correlation=2),
          x("x_runtime", "xReadBuffer", 100, 15, correlation=3, loom_role="memory"),
          x("gpu_memcpy", "copy DtoH", 102, 10, pid=0, tid=8, correlation=3, direction="DtoH")]
    path = write("blocking.json", ev)
    cp = report(path)
    s = check_step("blocking", cp, 120, {"host": 23, "launch": 9, "compute": 70, "copy": 10,
                                         "sync": 8}, "compute-bound", 7, 8)
    expect("blocking: evidence", s["evidence"] == "compute 58.3% of the path, most in gemm "
           "(1, 0.070 ms)", s["evidence"])
    on = {r["name"]: (r["class"], r["on_path"], r["time_ns"] // US) for r in rows(cp["on_path"])}
    expect("blocking: on the path", on.get("gemm") == ("compute", 1, 70) and
           on.get("xLaunch") == ("launch", 2, 12) and on.get("xReadBuffer") == ("launch", 1, 5)
           and on.get("copy DtoH") == ("copy", 1, 10) and "relu" not in on, on)
    relu = [r for r in rows(cp["slack"]) if r["name"] == "relu"]
    expect("blocking: relu off the path", relu and relu[0]["min_slack_ns"] == 21 * US, relu)
    # the marked trace: exactly these events, and the two blocking waits drawn as sync flows
    out = os.path.join(TMP, "blocking-marked.json")
    subprocess.run([LOOM, "report", path, "--critical-path-trace", out, "-o", os.devnull],
                   check=True)
    with open(out) as f:
        doc = json.load(f)["traceEvents"]
    marked = sorted((e["name"], e["ts"]) for e in doc
                    if e["ph"] == "X" and e.get("args", {}).get("critical"))
    expect("blocking: marked events", marked == sorted([
        ("ProfilerStep#1", 0), ("forward", 5), ("xLaunch", 10), ("gemm", 15), ("xLaunch", 91),
        ("xReadBuffer", 100), ("copy DtoH", 102)]), marked)
    # flows start at their source node: the calls' starts, the work's ends, and the ends
    # before the next event on the thread (the first xLaunch's, the op's)
    flows = sorted((e["name"][15:], round(float(e["ts"]))) for e in doc
                   if e.get("cat") == "critical_path" and e["ph"] == "s")
    expect("blocking: flows", flows == [("launch", 10), ("launch", 100), ("sync", 85),
                                        ("sync", 112), ("thread", 90), ("thread", 95)], flows)


def late_rank():
    """Two ranks, step [0, 100] each.  Rank 0: work [0, 10], MPI_Allreduce [10, 80]; rank 1:
    work [0, 75], MPI_Allreduce [75, 80].  Rank 0's path: 10 host, the allreduce 70, 20
    host; rank 1 entered at 75: 65 of the 70 are waiting for rank 1, 5 communication."""
    paths, merged = [], []
    for r, work in ((0, 10), (1, 75)):
        ev = [proc(100 + r, "rank %d: app" % r),
              x("user_annotation", "ProfilerStep#1", 0, 100, pid=100 + r),
              x("cpu_op", "work", 0, work, pid=100 + r),
              x("mpi", "MPI_Allreduce", work, 80 - work, pid=100 + r, comm=0, comm_size=2,
                comm_rank=r, seq=0, loom_role="comm,nxn")]
        paths.append(write("rank%d.json" % r, ev))
        merged += ev
    cp = report(*paths, extra=("--wait-threshold", "0"))
    s = check_step("late rank", cp, 100, {"host": 30, "communication": 5, "waiting": 65},
                   "waiting on a late rank", 3, 3)
    expect("late rank: names rank 1", "waiting for rank 1" in s["evidence"], s["evidence"])
    # the same two ranks merged into one trace: overlapping steps share a graph, each has
    # its own path; rank 1's: 75 host in its work, 5 in the allreduce, 20 host
    cp = report(write("merged.json", merged), extra=("--wait-threshold", "0"))
    st = rows(cp["steps"])
    got = [(r["pid"], r["host_ns"] // US, r["communication_ns"] // US, r["waiting_ns"] // US,
            r["bound"], r["on_path"]) for r in st]
    expect("merged ranks: a path per rank", got == [
        (100, 30, 5, 65, "waiting on a late rank", 3), (101, 95, 5, 0, "host-bound", 3)], got)


def windows():
    """No steps: 22000 x (op [10i, 10i+8], launch inside, kernel), 66000 events.  A graph
    holds at most a quarter of the sort budget's worth of events, at least 65536: with
    --sort-memory 1, 65536; a window is cut when it holds 65535, so two windows of 65535
    (21845 iterations) and 465 events."""
    ev = [proc(100, "app"), proc(0, "GPU 0")]
    for i in range(22000):
        t = 10 * i
        ev.append(x("cpu_op", "op", t, 8))
        ev.append(x("x_runtime", "xLaunch", t + 1, 6, correlation=i + 1, loom_role="launch"))
        ev.append(x("kernel", "tiny", t + 6, 1, pid=0, tid=7, correlation=i + 1))
    cp = report(write("windows.json", ev), extra=("--sort-memory", "1"))
    st = rows(cp["steps"])
    expect("windows: two", [s["events"] for s in st] == [65535, 465], [s["events"] for s in st])
    expect("windows: names", st and st[0]["step"].startswith("window at"), st and st[0]["step"])
    # window 1 ends with op 21844 [218440, 218448]; window 2 begins with op 21845
    expect("windows: first length", st and st[0]["length_ns"] == 218448 * US, st and st[0])
    expect("windows: second start", len(st) > 1 and st[1]["start_ns"] == 218450 * US,
           len(st) > 1 and st[1])


def hta_simple_add():
    """HTA's simple_add trace (whole trace, as HTA's end-to-end test runs it): 618 of the 624
    events of HTA's path are on loom's; the other 6 are the last 5 kernels and a memset,
    which ended 235 us before the cudaDeviceSynchronize call began (HTA weighs the time
    between top-level ops 0, loom does not).  loom's path also holds the 8 user
    annotations (HTA leaves them out of its graph), 66 zero-length calls (HTA's longest
    path may skip a zero-length event, loom's follows the thread through it), the kernel
    that ran inside the trace's first cudaLaunchKernel (a 4.219 s call, CUDA loading its
    modules, which returned 4 us after its 4 us kernel ended: a blocking call by loom's
    rule, its end waits for the kernel), the 13 calls and ops that ran on the host while
    the last kernels ran, and the last cudaDeviceSynchronize (the end of the trace: HTA
    gives its wait no weight)."""
    src = os.path.join(TESTS, "data", "kineto", "hta_gpu_simple_add.json.gz")
    out = os.path.join(TMP, "marked.json")
    subprocess.run([LOOM, "report", src, "--critical-path-trace", out, "-o", os.devnull],
                   check=True)
    key = lambda e: (round(float(e["ts"])) % 10**10, e["name"], e.get("tid"))
    with gzip.open(os.path.join(TESTS, "data", "critpath", "hta_simple_add_overlaid.json.gz")) as f:
        hta = {key(e): e for e in json.load(f)["traceEvents"]
               if e["ph"] == "X" and e.get("args", {}).get("critical")}
    with open(out) as f:
        mine = json.load(f)["traceEvents"]
    loom = {key(e): e for e in mine if e["ph"] == "X" and e.get("args", {}).get("critical")}
    both = set(hta) & set(loom)
    expect("simple_add: HTA's path events on loom's", len(hta) == 624 and len(both) == 618,
           (len(hta), len(both)))
    only_h = sorted(hta[k]["ts"] for k in set(hta) - set(loom))
    expect("simple_add: HTA only: the last kernels", len(only_h) == 6 and
           all(1694040010096363 <= t <= 1694040010096876 for t in only_h), only_h)
    only_l = [loom[k] for k in set(loom) - set(hta)]
    ann = [e for e in only_l if e["cat"] == "user_annotation"]
    zero = [e for e in only_l if e["cat"] != "user_annotation" and float(e["dur"]) == 0]
    rest = sorted((e for e in only_l if e not in ann and e not in zero), key=lambda e: float(e["ts"]))
    expect("simple_add: loom only", (len(ann), len(zero), len(rest)) == (8, 66, 15),
           (len(ann), len(zero), len(rest)))
    expect("simple_add: loom only: the kernel in the first launch",
           rest and rest[0]["cat"] == "kernel" and float(rest[0]["ts"]) == 10009743542 and
           float(rest[0]["dur"]) == 4, rest and rest[0])
    expect("simple_add: loom only: host while the kernels ran, then the last sync",
           rest and all(10010096364 <= float(e["ts"]) <= 10010096880 for e in rest[1:-1]) and
           rest[-1]["name"] == "cudaDeviceSynchronize", [(e["ts"], e["name"]) for e in rest])
    # a flow per dependency of the path between two events; HTA's overlaid trace has 17
    # launch and 17 sync flows: the same 16 of each (the memcpys and their stream syncs);
    # its 17th of each is the last kernel's (the difference above), loom's the blocking
    # first launch's (its kernel, then the call's end); its 158 dependency flows join
    # top-level ops only, loom's thread flows every event to the next on its thread
    flows = [e for e in mine if e.get("cat") == "critical_path" and e["ph"] == "s"]
    by = {}
    for e in flows:
        by[e["name"]] = by.get(e["name"], 0) + 1
    expect("simple_add: path flows", by == {"critical_path: thread": 445,
           "critical_path: sync": 17, "critical_path: launch": 17} and len(loom) == 707, by)
    # 8 of the path's calls have a twin (same thread, time, length and name): both marked
    marked = sum(1 for e in mine if e["ph"] == "X" and e.get("args", {}).get("critical"))
    expect("simple_add: marked events", marked == 715, marked)
    return src, out, marked, len(flows)


def tp(path, *sql):
    tpdir = os.environ.get("LOOM_TP_DIR", os.path.expanduser("~/.cache/loom-tp"))
    if not os.path.exists(os.path.join(tpdir, "trace_processor.wasm")) or not shutil.which("node"):
        return None
    p = subprocess.run(["node", os.path.join(TESTS, "tp", "tp.mjs"), "--tp-dir", tpdir, path,
                        *sql], capture_output=True, text=True, timeout=240)
    expect("trace_processor loads " + path, p.returncode == 0, p.stderr[-400:])
    return json.loads(p.stdout)["results"] if p.returncode == 0 else []


def tp_checks(out, marked, nflows):
    """One trace_processor run (about 8 s): the marked trace's slices with critical = 1, its
    flows (the trace's own ac2g ones, as many as the file holds, and the path's), and its
    error stats: those of the input itself (7 slices dropped as overlapping, the same
    count trace_processor gives for hta_gpu_simple_add.json.gz as HTA ships it)."""
    q = ["select count(*) as n from slice join args using (arg_set_id) "
         "where args.key = 'args.critical' and args.int_value = 1",
         "select count(*) as n from flow",
         "select name, sum(value) as v from stats where value > 0 and severity in "
         "('error', 'data_loss') group by name order by name"]
    with open(out) as f:
        own = sum(1 for e in json.load(f)["traceEvents"] if e.get("cat") == "ac2g" and e["ph"] == "s")
    b = tp(out, *q)
    if b is None:
        return False
    if b:
        expect("tp: marked slices", b[0][0]["n"] == marked == 715, (b[0][0]["n"], marked))
        expect("tp: path flows", b[1][0]["n"] - own == nflows == 479, (b[1][0]["n"], own, nflows))
        expect("tp: no error stat the input lacks",
               b[2] == [{"name": "slice_drop_overlapping_complete_event", "v": 7}], b[2])
    return True


launch_bound()
copy_bound()
cross_queue()
sync_bound()
blocking()
late_rank()
windows()
src, out, marked, nflows = hta_simple_add()
have_tp = tp_checks(out, marked, nflows)
shutil.rmtree(TMP, ignore_errors=True)
if failed:
    print("%d failed" % len(failed))
    sys.exit(1)
if not have_tp:
    print("trace_processor is not set up (tests/tp/setup.sh): its checks skipped")
    sys.exit(1 if os.environ.get("LOOM_TP_REQUIRED") else 77)
print("ok")
