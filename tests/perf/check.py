#!/usr/bin/python3
"""check.py - records a program with `loom record --devices cpu,perf` and
checks the CPU samples and OS counters of the Chrome JSON it writes.

usage: check.py MODE LOOM SPLIT OUTDIR
  split     split.c: 70/30 shares of busy_seventy/busy_thirty (within 5
            points), exact names, each sample inside the right user range,
            call chains that reach main through libc; its .pftrace in
            trace_processor: the same samples over interned callstacks
  sleep     `split sleep` (200 sleeps of 1 ms): context switches counted
  fallback  as root with perf_event_paranoid 2: rerun as nobody; user-space
            samples only, and a warning naming perf_event_paranoid
  deep      recursion past 256 frames: stacks cut, counted and warned
  memory    `split busy 2500`, perf.memory=2m: unwound while recording
            (perf.live=1), nearly all samples kept; unwound after it
            (perf.live=0), most of them lost past perf.memory
  kcache    the kernel's symbols kept between recordings: read, kept, used
            again, read again when the kept file is cut, old or foreign
  python    /usr/bin/python3 in a numpy matmul loop: native BLAS and numpy
            frames under the interpreter's own frames
  closefds  `split closefds FILE` (a session of its own): the program closes
            every descriptor it did not open, loom's perf events and libdw's
            files among them, and takes their numbers for pipes and FILE;
            loom stays idle while it sleeps, says what it lost, and neither
            closes nor writes into any of the program's descriptors
split and python also check each frame's name against libdwfl's own
search (LOOM_PERF_CHECK_NAMES=1: perf.names_mismatched must be 0).
Exit 77 (skipped) where the mode cannot run here.
"""
import json
import os
import re
import subprocess
import sys

SKIP = 77
errors = []


def check(cond, what):
    if not cond:
        errors.append(what)
    return cond


def record(loom, argv, out, user=None, env=None, options=()):
    cmd = [loom, "record", "--devices", "cpu,perf", "-o", out]
    for o in options:
        cmd += ["--option", o]
    cmd += ["--"] + argv
    if user:
        cmd = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"] + cmd
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=240, env=env)
    if p.returncode != 0:
        sys.exit("loom record failed (%d): %s\n%s" % (p.returncode, " ".join(cmd), p.stderr))
    with open(out) as f:
        return json.load(f), p.stderr


def frames_of(trace):
    sf = trace.get("stackFrames")
    if not check(isinstance(sf, dict) and sf, "no stackFrames in the trace"):
        sys.exit("\n".join(errors))
    return sf


def chain(sf, fid):
    """The frames of a sample, leaf first."""
    out, seen = [], set()
    while fid is not None:
        if fid in seen or fid not in sf:
            errors.append("stack frame %r missing or in a cycle" % fid)
            break
        seen.add(fid)
        out.append(sf[fid])
        fid = sf[fid].get("parent")
    return out


def main_samples(trace):
    pid = int(trace["pid"])
    return [s for s in trace.get("samples", []) if s["tid"] == pid]


def check_meta(trace, samples):
    n = int(trace.get("perf.samples", -1))
    check(n == len(trace.get("samples", [])),
          "perf.samples=%d but %d samples in the trace" % (n, len(trace.get("samples", []))))
    check(int(trace.get("perf.distinct_frames", 0)) > 0, "perf.distinct_frames is 0")
    # Frames named from loom's index of a module's symbols, each checked
    # against libdwfl's own search (LOOM_PERF_CHECK_NAMES=1, set in main).
    indexed = int(trace.get("perf.names_indexed", 0))
    check(indexed > 0, "perf.names_indexed is %d: no frame named from the symbol index" % indexed)
    check(trace.get("perf.names_mismatched") == "0",
          "perf.names_mismatched is %r: the index named frames unlike libdwfl" %
          trace.get("perf.names_mismatched"))
    print("names: %d from the index (all as libdwfl names them), %s by libdwfl" %
          (indexed, trace.get("perf.names_dwfl")))


def mode_split(loom, split, outdir):
    out = os.path.join(outdir, "split.json")
    trace, _ = record(loom, [split], out)
    sf = frames_of(trace)
    smp = main_samples(trace)
    check_meta(trace, smp)
    # 1 s of the main thread's CPU time at 1 kHz: about 1000 samples.
    check(len(smp) >= 700, "only %d samples of the main thread (expected about 1000)" % len(smp))
    leaf = {"busy_seventy": [], "busy_thirty": []}
    for s in smp:
        c = chain(sf, s["sf"])
        if c and c[0]["name"] in leaf:
            leaf[c[0]["name"]].append((s, c))
    n70, n30 = len(leaf["busy_seventy"]), len(leaf["busy_thirty"])
    check(n70 + n30 >= 0.9 * len(smp),
          "leaf busy_seventy/busy_thirty in %d of %d samples (expected >= 90%%)" % (n70 + n30, len(smp)))
    if n70 + n30:
        share = 100.0 * n70 / (n70 + n30)
        print("busy_seventy %d, busy_thirty %d: %.1f%% / %.1f%%" % (n70, n30, share, 100 - share))
        check(abs(share - 70.0) <= 5.0, "busy_seventy's share %.1f%% is not within 5 points of 70%%" % share)
    # Exact names and modules: the program's own symbols, in the program.
    for name, lst in leaf.items():
        for s, c in lst:
            f = c[0]
            check(f["loom_function"] == name and f["loom_module"] == os.path.realpath(split) and
                  f["category"] == os.path.basename(split),
                  "frame %r: function %r module %r category %r" %
                  (name, f["loom_function"], f["loom_module"], f["category"]))
    # Call chains: busy_* <- main <- libc's start code <- _start.
    broken = 0
    for lst in leaf.values():
        for s, c in lst:
            names = [f["name"] for f in c]
            if len(c) < 3 or c[1]["name"] != "main" or c[1]["category"] != os.path.basename(split) \
                    or not c[2]["category"].startswith("libc.so"):
                broken += 1
            elif c[-1]["name"] != "_start":
                broken += 1
    check(broken <= (n70 + n30) // 100,
          "%d of %d busy samples do not unwind to main <- libc <- _start" % (broken, n70 + n30))
    # Ranges: a sample of busy_seventy lies in a range_a slice of its thread.
    ranges = {"range_a": [], "range_b": []}
    for e in trace["traceEvents"]:
        if e.get("ph") == "X" and e.get("name") in ranges:
            ranges[e["name"]].append((e["tid"], e["ts"], e["ts"] + e["dur"]))
    check(len(ranges["range_a"]) == 10 and len(ranges["range_b"]) == 10,
          "expected 10 range_a and 10 range_b slices, got %d and %d" %
          (len(ranges["range_a"]), len(ranges["range_b"])))
    for fn, rn in (("busy_seventy", "range_a"), ("busy_thirty", "range_b")):
        outside = [s["ts"] for s, c in leaf[fn]
                   if not any(t == s["tid"] and b <= s["ts"] <= e for t, b, e in ranges[rn])]
        check(not outside, "%d samples of %s lie outside every %s slice (first at ts %s)" %
              (len(outside), fn, rn, outside[:1]))
        if not outside:
            print("%s: %d samples, all inside %s" % (fn, len(leaf[fn]), rn))
    # The same samples as Perfetto callstacks (.pftrace: interned frames,
    # mappings and callstacks, one PerfSample each).
    want = {"busy_seventy": 0, "busy_thirty": 0, "*": 0}
    for s in trace["samples"]:
        if "sf" not in s:
            continue
        want["*"] += 1
        leaf_name = sf[s["sf"]]["name"]
        if leaf_name in want and sf[s["sf"]]["loom_module"] == os.path.realpath(split):
            want[leaf_name] += 1
    check_pftrace(loom, out, want, os.path.realpath(split))


def counter_series(trace, tid):
    rows = [(e["ts"], e["args"]) for e in trace["traceEvents"]
            if e.get("ph") == "C" and e.get("tid") == tid and
            e.get("name") == "os counters tid %d" % tid]
    rows.sort(key=lambda r: r[0])
    return rows


def mode_sleep(loom, split, outdir):
    out = os.path.join(outdir, "sleep.json")
    trace, _ = record(loom, [split, "sleep"], out)
    pid = int(trace["pid"])
    rows = counter_series(trace, pid)
    if not check(rows, "no 'os counters tid %d' counter track" % pid):
        return
    for key in ("context_switches", "page_faults", "cpu_migrations"):
        vals = [a.get(key) for _, a in rows]
        check(all(isinstance(v, int) for v in vals), "counter %s missing in some rows" % key)
        check(all(x <= y for x, y in zip(vals, vals[1:])),
              "counter %s is cumulative but decreases over time" % key)
    cs = rows[-1][1]["context_switches"]
    print("context switches of the main thread: %d (200 sleeps)" % cs)
    # Each 1 ms nanosleep blocks, so each is at least one switch.
    check(cs >= 190, "only %d context switches counted for 200 sleeps" % cs)
    check(cs < 2000, "%d context switches for 200 sleeps: counted more than once?" % cs)


def mode_kcache(loom, split, outdir):
    """The kernel's symbols kept between recordings (backends/perf/kcache.c):
    read from /proc/kallsyms and kept at the first, used again at the
    second with the same names, and read again when the kept file is cut
    short, from an older boot, or not this user's."""
    cache = os.path.join(outdir, "cache")
    subprocess.run(["rm", "-rf", cache], check=True)
    env = dict(os.environ, XDG_CACHE_HOME=cache)
    path = os.path.join(cache, "loom", "kallsyms-%d" % os.geteuid())
    out = os.path.join(outdir, "kcache.json")

    def run(what):  # 100 ms of CPU in the kernel: kernel frames at 1 kHz
        trace, _ = record(loom, [split, "kernel"], out, env=env)
        src = trace.get("perf.kernel_symbols")
        names = {f["name"] for f in frames_of(trace).values() if f.get("category") == "[kernel]"}
        return src, names

    src, names = run("first")
    if src in ("unread", "none"):
        print("no kernel frame named here (perf.kernel_symbols=%s): nothing to keep" % src)
        return SKIP
    check(src == "kallsyms", "first recording: perf.kernel_symbols=%r, expected 'kallsyms'" % src)
    if not check(os.path.exists(path), "no cache file %s after the first recording" % path):
        return
    st = os.stat(path)
    check(st.st_mode & 0o777 == 0o600, "cache file mode %o, expected 600" % (st.st_mode & 0o777))
    check(os.stat(os.path.dirname(path)).st_mode & 0o777 == 0o700, "cache folder not 0700")
    size = st.st_size
    src, names = run("second")
    check(src == "cache", "second recording: perf.kernel_symbols=%r, expected 'cache'" % src)
    with open("/proc/kallsyms") as f:
        text = {ln.split()[2] for ln in f if len(ln.split()) >= 3 and ln.split()[1] in "tT"}
    unknown = [n for n in names if n not in text and not n.startswith("0x")]
    check(names and not unknown, "%d kernel frames from the cache, %d not kernel text symbols: %s" %
          (len(names), len(unknown), unknown[:3]))
    print("second recording: %d kernel frame names from the cache, all in /proc/kallsyms" % len(names))
    with open(path, "r+b") as f:  # cut short
        f.truncate(size - 1)
    src, _ = run("cut")
    check(src == "kallsyms" and os.path.getsize(path) == size,
          "cache cut short: %r, size %d (expected 'kallsyms', rewritten to %d)" %
          (src, os.path.getsize(path), size))
    with open(path, "r+b") as f:  # another boot's
        f.seek(8)
        f.write(b"00000000")
    src, _ = run("boot")
    check(src == "kallsyms", "cache of another boot used: %r" % src)
    os.chown(path, 65534, 65534)  # not this user's
    src, _ = run("owner")
    check(src == "kallsyms" and os.stat(path).st_uid == os.geteuid(),
          "cache of another user: %r, owner %d" % (src, os.stat(path).st_uid))
    print("cut short, another boot's, another user's: each read again from /proc/kallsyms")


def mode_memory(loom, split, outdir):
    """perf.memory bounds what is kept while recording.  Unwound as they come
    (perf.live=1, the default), samples keep only their frames and give back
    their copies of the user stack (here some 3-10 KiB each, up to
    perf.stack), so 2 MiB hold nearly all of 2.5 s of samples; unwound only
    after recording (perf.live=0), 2 MiB hold a fraction of them and the rest
    are counted lost."""
    got = {}
    for live in ("1", "0"):
        out = os.path.join(outdir, "memory%s.json" % live)
        trace, _ = record(loom, [split, "busy", "2500"], out,
                          options=("perf.memory=2m", "perf.live=" + live))
        smp = main_samples(trace)
        during = int(trace.get("perf.unwound_while_recording", -1))
        lost = [w for w in trace.get("loom_warnings", []) if "samples past perf.memory" in w]
        nlost = int(re.search(r"lost (\d+)", lost[0]).group(1)) if lost else 0
        got[live] = (len(smp), during, nlost)
        print("perf.live=%s, perf.memory=2m: %d samples of the main thread, %d unwound while "
              "recording, %d lost past perf.memory" % (live, len(smp), during, nlost))
    n, during, nlost = got["1"]
    check(n >= 1800, "perf.live=1: only %d samples kept in 2 MiB (expected about 2500)" % n)
    # Only the first samples may be lost: they wait while the worker reads
    # each library's symbols and unwinding tables, and the kernel's symbols,
    # once (tens of ms; over 100 under a sanitizer).
    check(nlost <= 0.15 * n, "perf.live=1: %d samples lost past perf.memory" % nlost)
    check(during >= 0.9 * n, "perf.live=1: only %d of %d samples unwound while recording" %
          (during, n))
    n0, during0, nlost0 = got["0"]
    check(n0 <= 0.5 * n, "perf.live=0: %d samples kept in 2 MiB of stack copies (perf.live=1: %d)"
          % (n0, n))
    check(nlost0 > 0, "perf.live=0: no warning of samples lost past perf.memory")
    check(during0 == 0, "perf.live=0: %d samples unwound while recording" % during0)


def mode_fallback(loom, split, outdir):
    try:
        with open("/proc/sys/kernel/perf_event_paranoid") as f:
            paranoid = int(f.read())
    except (OSError, ValueError):
        return SKIP
    if os.geteuid() != 0 or paranoid != 2:
        print("skipped: needs root (to switch to nobody) and perf_event_paranoid 2 (it is %d)" % paranoid)
        return SKIP
    os.chmod(outdir, 0o777)
    out = os.path.join(outdir, "fallback.json")
    if os.path.exists(out):
        os.unlink(out)
    trace, err = record(loom, [split], out, user=True)
    sf = frames_of(trace)
    smp = main_samples(trace)
    check(trace.get("perf.user_only") == "1", "perf.user_only is %r, expected 1" % trace.get("perf.user_only"))
    check(len(smp) >= 700, "only %d samples as nobody (expected about 1000)" % len(smp))
    kernel = sum(1 for s in smp for f in chain(sf, s["sf"]) if f["category"] == "[kernel]")
    check(kernel == 0, "%d kernel frames recorded without permission for them" % kernel)
    n70 = sum(1 for s in smp if sf[s["sf"]]["name"] == "busy_seventy")
    check(n70 >= 0.5 * len(smp), "busy_seventy is the leaf of only %d of %d samples" % (n70, len(smp)))
    check("perf_event_paranoid" in err and "user space" in err,
          "no warning naming perf_event_paranoid on stderr:\n" + err)
    print("as nobody: %d samples, %d with leaf busy_seventy, 0 kernel frames" % (len(smp), n70))


def mode_deep(loom, split, outdir):
    """Stacks deeper than the frames kept: cut, counted and said."""
    out = os.path.join(outdir, "deep.json")
    trace, err = record(loom, [split, "deep"], out)
    sf = frames_of(trace)
    smp = main_samples(trace)
    lens = [len(chain(sf, s["sf"])) for s in smp]
    full = sum(1 for n in lens if n >= 256)
    cut = int(trace.get("perf.stacks_cut", -1))
    print("deep: %d samples, %d with 256 frames, perf.stacks_cut %d, longest %d" % (len(smp), full, cut,
                                                                                     max(lens or [0])))
    check(max(lens or [0]) == 256, "the longest stack has %d frames, expected 256" % max(lens or [0]))
    check(full >= len(smp) // 2, "only %d of %d samples reached 256 frames" % (full, len(smp)))
    check(cut == full, "perf.stacks_cut is %d, %d samples have 256 frames" % (cut, full))
    check("stacks reached 256 frames" in err, "no warning of the cut stacks on stderr:\n" + err)
    check(any("stacks reached 256 frames" in w for w in trace.get("loom_warnings", [])),
          "no warning of the cut stacks in the trace")


NATIVE = ("libopenblas", "libblas", "libtorch", "_multiarray_umath", "libgomp")


def mode_python(loom, split, outdir):
    py = "/usr/bin/python3"
    if subprocess.run([py, "-c", "import numpy"], capture_output=True).returncode != 0:
        print("skipped: /usr/bin/python3 cannot import numpy (Debian: python3-numpy)")
        return SKIP
    script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "matmul.py")
    out = os.path.join(outdir, "python.json")
    trace, _ = record(loom, [py, script], out)
    sf = frames_of(trace)
    smp = main_samples(trace)
    check_meta(trace, smp)
    check(len(smp) >= 1000, "only %d samples of the main thread (expected about 1500)" % len(smp))
    native = 0
    for s in smp:
        c = chain(sf, s["sf"])
        mods = [f["category"] for f in c]
        blas = any(m.startswith(("libopenblas", "libblas")) for m in mods)
        numpy = any(m.startswith("_multiarray_umath") for m in mods)
        interp = any(m.startswith("python3") and f["loom_function"] in
                     ("_PyEval_EvalFrameDefault", "Py_RunMain", "Py_BytesMain")
                     for m, f in zip(mods, c))
        if blas and numpy and interp and c[0]["category"].startswith(NATIVE) and c[0]["loom_function"]:
            native += 1
    print("python: %d of %d samples in a named native frame under numpy and the interpreter" %
          (native, len(smp)))
    check(native >= 0.5 * len(smp),
          "only %d of %d samples show BLAS <- numpy <- python3 frames" % (native, len(smp)))


def mode_closefds(loom, split, outdir):
    path = os.path.join(outdir, "program-file.txt")
    env = dict(os.environ, LOOM_PLUGIN_PATH=os.path.join(os.path.dirname(loom), "plugins"))
    p = subprocess.run([split, "closefds", path], capture_output=True, text=True, timeout=120, env=env)
    print(p.stdout.strip())
    if "perf: no CPU samples" in p.stderr:
        print("skipped: perf sampling unavailable here")
        return SKIP
    if not check(p.returncode == 0, "split closefds exited %d: %s" % (p.returncode, p.stderr)):
        return
    # 300 ms asleep, loom's numbers closed, then the program's: loom's reader
    # and worker wake now and then; a reader polling descriptors that are
    # closed (or regular files) would spin through all of it.
    for what in ("closed", "reused"):
        idle = re.search(r"idle cpu ms %s ([0-9.]+)" % what, p.stdout)
        check(idle and float(idle.group(1)) < 100,
              "the program used %s ms of CPU while asleep 300 ms, loom's descriptors %s "
              "(loom spinning?)" % (idle.group(1) if idle else "?", what))
    check(re.search(r"warning: .*perf: the program closed \d+ of the \d+ perf_event descriptors",
                    p.stdout), "no warning that the program closed loom's perf descriptors")
    check("still open 40 of 40," in p.stdout,
          "loom closed some of the program's descriptors: " + p.stdout)
    check("pipes with nothing written 10 of 10" in p.stdout,
          "loom wrote into the program's pipes: " + p.stdout)
    with open(path) as f:
        text = f.read()
    want = "".join("program line %d\n" % i for i in range(20))
    check(text == want, "the program's file is not exactly its own 20 lines: %r" % text[:200])


TP = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tp", "tp.mjs")


def check_pftrace(loom, json_path, want_leaf, module):
    """The .pftrace of the trace in trace_processor: one perf sample per
    sample with a stack, the same leaf functions, their module, no error."""
    tp_dir = os.environ.get("LOOM_TP_DIR") or os.path.expanduser("~/.cache/loom-tp")
    if not os.path.exists(os.path.join(tp_dir, "trace_processor.wasm")):
        check(not os.environ.get("LOOM_TP_REQUIRED"), "trace_processor not set up in " + tp_dir)
        print("pftrace: trace_processor not set up, not checked")
        return
    pf = json_path[:-5] + ".pftrace"
    p = subprocess.run([loom, "convert", json_path, pf], capture_output=True, text=True, timeout=240)
    if not check(p.returncode == 0, "loom convert to .pftrace failed: " + p.stderr):
        return
    q = subprocess.run(["node", TP, "--tp-dir", tp_dir, pf,
                        "select count(*) as n from perf_sample",
                        "select f.name as name, m.name as module, count(*) as n from perf_sample s "
                        "join stack_profile_callsite c on c.id = s.callsite_id "
                        "join stack_profile_frame f on f.id = c.frame_id "
                        "join stack_profile_mapping m on m.id = f.mapping group by 1, 2",
                        "select count(*) as n from perf_sample s join stack_profile_callsite c "
                        "on c.id = s.callsite_id where c.depth >= 3",
                        "select name, value from stats where value > 0 and severity in ('error', 'data_loss')"],
                       capture_output=True, text=True, timeout=600)
    if not check(q.returncode == 0, "trace_processor failed: " + q.stderr):
        return
    n, leaves, deep, errs = json.loads(q.stdout)["results"]
    check(n[0]["n"] == want_leaf["*"], "pftrace: %d perf samples, the JSON holds %d with a stack" %
          (n[0]["n"], want_leaf["*"]))
    got = {(r["name"], r["module"]): r["n"] for r in leaves}
    for fn in ("busy_seventy", "busy_thirty"):
        check(got.get((fn, module)) == want_leaf[fn], "pftrace: %s in %s leaf of %s samples, the JSON: %d" %
              (fn, module, got.get((fn, module)), want_leaf[fn]))
    check(deep[0]["n"] >= 0.9 * want_leaf["*"], "pftrace: only %d callstacks 4 frames deep or more" % deep[0]["n"])
    check(not errs, "pftrace: trace_processor reports %s" % errs)
    print("pftrace: %d perf samples, busy_seventy %s, busy_thirty %s, no error" %
          (n[0]["n"], got.get(("busy_seventy", module)), got.get(("busy_thirty", module))))


def main():
    if len(sys.argv) != 5:
        sys.exit(__doc__)
    mode, loom, split, outdir = sys.argv[1:]
    os.makedirs(outdir, exist_ok=True)
    os.environ["LOOM_PERF_CHECK_NAMES"] = "1"
    rc = {"split": mode_split, "sleep": mode_sleep, "fallback": mode_fallback, "deep": mode_deep, "memory": mode_memory,
          "kcache": mode_kcache, "closefds": mode_closefds,
          "python": mode_python}[mode](loom, split, outdir)
    if rc == SKIP:
        sys.exit(SKIP)
    if errors:
        print("FAILED:\n  " + "\n  ".join(errors))
        sys.exit(1)
    print("ok")


if __name__ == "__main__":
    main()
