#!/usr/bin/python3
"""The Kineto bridge against the real libkineto: runs kineto_drive (drive.cpp,
libkineto driven as torch.profiler drives it) and checks the JSON Kineto
saved, what trace_processor reads in it, and loom's own trace of the same
records (LOOM_KINETO_TRACE).

  /usr/bin/python3 check.py opencl|vulkan|fakert|edges|loading OUT_DIR

Paths come from the environment ctest sets (tests/kineto/CMakeLists.txt).
Exit 0 when every check holds, 77 when a needed part is missing here
(an OpenCL device, trace_processor) and LOOM_TP_REQUIRED is not set, 1
otherwise."""
import json
import os
import shutil
import subprocess
import sys
import sysconfig

MODE, OUT = sys.argv[1], sys.argv[2]
E = os.environ
DRIVE, BRIDGE = E["LOOM_KINETO_TEST_DRIVE"], E["LOOM_KINETO_TEST_BRIDGE"]
OPS = 4
HERE = os.path.dirname(os.path.abspath(__file__))
failures = 0


def skip(why):
    print("SKIP:", why)
    sys.exit(1 if E.get("LOOM_TP_REQUIRED") else 77)


def expect(what, ok, detail=""):
    global failures
    if not ok:
        failures += 1
    print(f"  {'ok ' if ok else 'BAD'} {what}{': ' + str(detail) if detail != '' else ''}")


def drive(name, *args, env=None, bridge=BRIDGE, wrap=()):
    """Runs kineto_drive (under the command wrap, if any) writing OUT/name.json;
    returns (process, its path)."""
    path = os.path.join(OUT, name + ".json")
    full = dict(E, **(env or {}))
    full.setdefault("KINETO_LOG_LEVEL", "3")  # Kineto's errors only
    cmd = list(wrap) + [DRIVE, path, "--bridge", bridge] + list(args)
    p = subprocess.run(cmd, env=full, capture_output=True, text=True, timeout=240)
    print(f"{name}: {' '.join(cmd[len(wrap) + 2:])} -> {p.returncode}")
    if p.returncode != 0:
        print(p.stdout, p.stderr)
    return p, path


def load(path):
    with open(path) as f:
        return json.load(f)


def by_cat(t, cat, ph="X"):
    return [e for e in t["traceEvents"] if e.get("cat") == cat and e.get("ph") == ph]


def cats(t):
    n = {}
    for e in t["traceEvents"]:
        if e.get("ph") == "X":
            n[e["cat"]] = n.get(e["cat"], 0) + 1
    return n


def tp(path, *sql):
    tpdir = E.get("LOOM_TP_DIR", os.path.expanduser("~/.cache/loom-tp"))
    if not os.path.exists(os.path.join(tpdir, "trace_processor.wasm")) or not shutil.which("node"):
        skip("trace_processor is not set up (tests/tp/setup.sh)")
    p = subprocess.run(["node", E["LOOM_KINETO_TEST_TP"], "--tp-dir", tpdir, path] + list(sql),
                       capture_output=True, text=True, timeout=240)
    if p.returncode != 0:
        return None
    return json.loads(p.stdout)["results"]


def tp_checks(path, slices, flows):
    r = tp(path, "select count(*) as n from slice", "select count(*) as n from flow",
           "select count(*) as n from stats where value > 0 and severity in ('error', 'data_loss')")
    expect("trace_processor loads it", r is not None)
    if r:
        expect("trace_processor slices", r[0][0]["n"] == slices, f"{r[0][0]['n']} want {slices}")
        expect("trace_processor flows", r[1][0]["n"] == flows, f"{r[1][0]['n']} want {flows}")
        expect("trace_processor errors", r[2][0]["n"] == 0, r[2][0]["n"])


def meta_names(t, what):
    return {(e["pid"], e["tid"]): e["args"]["name"] for e in t["traceEvents"]
            if e.get("ph") == "M" and e.get("name") == what}


def device_work(t):
    work = [e for e in t["traceEvents"] if e.get("ph") == "X" and e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")]
    return sorted(work, key=lambda e: (float(e["ts"]), e["name"]))


def check_links(t, per_op, first_id):
    """Every kernel and copy carries its op's External id and ends an ac2g flow that
    starts on a runtime call of the same op; device and queue rows are named."""
    work = device_work(t)
    ops = {e["args"]["External id"]: e for e in by_cat(t, "cpu_op")}
    expect("device records", len(work) == per_op * OPS, len(work))
    ids = [e.get("args", {}).get("External id") for e in work]
    want = [first_id + i // per_op for i in range(len(work))]
    expect("each device record's External id is its op's", ids == want, ids)
    starts = {(e["id"]): e for e in t["traceEvents"] if e.get("ph") == "s" and e.get("cat") == "ac2g"}
    ends = {(e["pid"], e["tid"], e["ts"]): e for e in t["traceEvents"] if e.get("ph") == "f" and e.get("cat") == "ac2g"}
    calls = {(e["pid"], e["tid"], e["ts"]): e for e in by_cat(t, "privateuse1_runtime")}
    linked = 0
    for w in work:
        f = ends.get((w["pid"], w["tid"], w["ts"]))
        s = starts.get(f["id"]) if f else None
        call = calls.get((s["pid"], s["tid"], s["ts"])) if s else None
        op = ops.get(w["args"].get("External id"))
        if call and op and float(op["ts"]) <= float(call["ts"]) <= float(op["ts"]) + float(op["dur"]):
            linked += 1
    expect("each device record ends an ac2g flow from a runtime call inside its op", linked == len(work),
           f"{linked} of {len(work)}")
    procs, threads = meta_names(t, "process_name"), meta_names(t, "thread_name")
    rows = {(w["pid"], w["tid"]) for w in work}
    expect("device rows named", all(procs.get((p, 0)) for p, _ in rows), {p: procs.get((p, 0)) for p, _ in rows})
    expect("queue rows named", all(threads.get(r) for r in rows), {r: threads.get(r) for r in rows})
    return work


def strip_start(v):
    """v without the figures counted from the trace's start (start_ns, timeline)."""
    if isinstance(v, dict):
        return {k: strip_start(x) for k, x in v.items() if k not in ("start_ns", "timeline")}
    if isinstance(v, list):
        return [strip_start(x) for x in v]
    return v


def compare_with_loom(kin_path, loom_path):
    """loom's own trace of the same session: the same device records, and loom
    report's device and HTA figures equal on both files."""
    k, l = load(kin_path), load(loom_path)
    kw, lw = device_work(k), device_work(l)
    expect("loom's own trace: same number of device records", len(kw) == len(lw), f"{len(kw)} vs {len(lw)}")
    same = all(a["name"] == b["name"] and abs(float(a["dur"]) - float(b["dur"])) <= 1.0 for a, b in zip(kw, lw))
    expect("loom's own trace: same names, durations within 1 us", same)
    loom = E["LOOM_KINETO_TEST_LOOM"]
    rep = {}
    for name, path in (("kineto", kin_path), ("loom", loom_path)):
        p = subprocess.run([loom, "report", path, "--json", "--all"], capture_output=True, text=True)
        expect(f"loom report reads {name}'s file", p.returncode == 0, p.stderr.strip()[:300])
        rep[name] = json.loads(p.stdout) if p.returncode == 0 else {}
    ref = {}
    for name, path in (("kineto", kin_path), ("loom", loom_path)):  # pandas' HTA (tests/hta)
        p = subprocess.run([sys.executable, os.path.join(HERE, "..", "hta", "reference.py"), path],
                           capture_output=True, text=True)
        if p.returncode == 0:
            ref[name] = json.loads(p.stdout)
            ref[name].pop("trace", None)
        elif "No module named 'pandas'" not in p.stderr:
            expect(f"HTA reference reads {name}'s file", False, p.stderr[-300:])
    if len(ref) == 2:
        expect("HTA's figures (tests/hta/reference.py) equal on both files", ref["kineto"] == ref["loom"],
               "" if ref["kineto"] == ref["loom"] else json.dumps(ref)[:600])
    elif E.get("LOOM_TP_REQUIRED"):
        expect("pandas for HTA's figures", False)
    for section in ("devices", "hta"):
        a, b = rep["kineto"].get(section), rep["loom"].get(section)
        if section == "devices":  # times from the trace's start: Kineto's starts before loom's
            a, b = strip_start(a), strip_start(b)
        expect(f"loom report '{section}' equal on both files", a == b and a is not None,
               "" if a == b else json.dumps([a, b])[:600])


def check_device_trace(t, path, work, loom_path):
    """work: the device records each op makes, by category."""
    n = cats(t)
    print("  categories:", n)
    expect("cpu_op from the client", n.get("cpu_op") == OPS, n.get("cpu_op"))
    for cat, k in work.items():
        expect(cat, n.get(cat) == k * OPS, f"{n.get(cat)} want {k * OPS}")
    lcats = cats(load(loom_path))
    runtime = sum(v for c, v in lcats.items() if c.endswith("_runtime") or c.endswith("_sync"))
    expect("runtime calls: as many as in loom's own trace", n.get("privateuse1_runtime") == runtime,
           f"{n.get('privateuse1_runtime')} vs {runtime}")
    steps = [e for e in by_cat(t, "gpu_user_annotation") if e["name"] == "step"]
    expect("gpu_user_annotation: 'step' on the queue, linked to the client's", len(steps) == 1 and
           steps[0]["args"].get("External id") == 1000, steps)
    expect("no loom warnings", "loom_warnings" not in t, t.get("loom_warnings"))
    check_links(t, sum(work.values()), 1001)
    flows = len([e for e in t["traceEvents"] if e.get("ph") == "f" and e.get("cat") == "ac2g"])
    slices = len([e for e in t["traceEvents"] if e.get("ph") in ("X", "i")])
    tp_checks(path, slices, flows)
    compare_with_loom(path, loom_path)


def mode_opencl():
    layer = E.get("LOOM_KINETO_TEST_OPENCL_LAYER")
    if not layer:
        skip("OpenCL was not built")
    loom_path = os.path.join(OUT, "opencl-loom.json")
    p, path = drive("opencl", "--register", "before", "--work", "opencl", "--ops", str(OPS),
                    env={"OPENCL_LAYERS": layer, "LOOM_KINETO_TRACE": loom_path})
    if p.returncode == 2 and "no usable OpenCL device" in p.stderr:
        skip("no OpenCL device")
    expect("kineto_drive ran", p.returncode == 0)
    t = load(path)
    check_device_trace(t, path, {"kernel": 1, "gpu_memcpy": 2}, loom_path)
    # the same program recorded by loom alone (loom record, no bridge session:
    # Kineto asked for CPU activity only): the same device records, by name
    alone = os.path.join(OUT, "opencl-alone.json")
    p, _ = drive("opencl-cpu", "--types", "cpu", "--work", "opencl", "--ops", str(OPS),
                 wrap=[E["LOOM_KINETO_TEST_LOOM"], "record", "--devices", "cpu,opencl", "-o", alone, "--"])
    names = lambda tr: sorted(e["name"] for e in device_work(tr))  # noqa: E731
    expect("loom alone (loom record): the same device records", names(load(alone)) == names(t),
           (names(load(alone)), names(t)))


def mode_vulkan():
    layers = E.get("LOOM_KINETO_TEST_VULKAN_LAYER_DIR")
    if not layers:
        skip("Vulkan was not built")
    loom_path = os.path.join(OUT, "vulkan-loom.json")
    p, path = drive("vulkan", "--register", "before", "--work", "vulkan", "--ops", str(OPS),
                    env={"VK_ADD_LAYER_PATH": layers, "VK_INSTANCE_LAYERS": "VK_LAYER_LOOM_trace",
                         "XDG_RUNTIME_DIR": OUT, "LOOM_KINETO_TRACE": loom_path})
    if p.returncode == 2 and "no usable Vulkan device" in p.stderr:
        skip("no Vulkan device")
    expect("kineto_drive ran", p.returncode == 0)
    t = load(path)
    check_device_trace(t, path, {"gpu_memset": 1, "kernel": 1, "gpu_memcpy": 1}, loom_path)


def mode_fakert():
    plugin = E["LOOM_KINETO_TEST_FAKERT_PLUGIN"]
    loom_path = os.path.join(OUT, "fakert-loom.json")
    # the runtime and its plug-in come after Kineto's init and the bridge
    p, path = drive("fakert", "--register", "after", "--work", "fakert", "--ops", str(OPS),
                    env={"FAKERT_LIB": E["LOOM_KINETO_TEST_FAKERT"], "FRT_TOOLS": plugin,
                         "LOOM_KINETO_TRACE": loom_path})
    expect("kineto_drive ran", p.returncode == 0)
    t = load(path)
    check_device_trace(t, path, {"kernel": 1, "gpu_memcpy": 1}, loom_path)
    expect("device row is fakert's", "fakert" in meta_names(t, "process_name").get((0, 0), ""))


def edges():
    sim = E["LOOM_KINETO_TEST_SIM"]
    layer = E.get("LOOM_KINETO_TEST_OPENCL_LAYER")
    # registered while the first trace is prepared: it serves the second
    p, path = drive("prepared", "--register", "prepared", "--work", "none", "--traces", "2",
                    env={"LOOM_PLUGINS": sim})
    t1, t2 = load(path), load(path.replace(".json", "-2.json"))
    expect("registered while prepared: first trace has no loom session", "loom_devices" not in t1)
    expect("... the second has one (sim)", t2.get("loom_devices") == "sim", t2.get("loom_devices"))
    # a trace with no device work: loom session, nothing logged but the client's
    n = cats(t2)
    n.pop("Trace", None)  # Kineto's spans
    expect("no device work: only the client's ops", n == {"cpu_op": OPS, "user_annotation": 1}, n)
    expect("no device work: no warnings", "loom_warnings" not in t2, t2.get("loom_warnings"))
    # two traces in a row with device work: each has its own ops' work
    if layer:
        p, path = drive("twice", "--register", "before", "--work", "opencl", "--traces", "2",
                        env={"OPENCL_LAYERS": layer})
        for k, f in enumerate([path, path.replace(".json", "-2.json")]):
            t = load(f)
            ids = sorted({e["args"]["External id"] for e in by_cat(t, "kernel")})
            expect(f"trace {k + 1} of 2: its kernels carry its ops' ids", ids == [1000 * (k + 1) + 1 + i for i in range(OPS)], ids)
    # two devices in one trace (OpenCL and the late-loaded fakert): a row each, work on both
    if layer:
        p, path = drive("two-devices", "--work", "opencl,fakert",
                        env={"OPENCL_LAYERS": layer, "FAKERT_LIB": E["LOOM_KINETO_TEST_FAKERT"],
                             "FRT_TOOLS": E["LOOM_KINETO_TEST_FAKERT_PLUGIN"]})
        t = load(path)
        procs = meta_names(t, "process_name")
        pids = sorted({e["pid"] for e in by_cat(t, "kernel")})
        expect("two devices: kernels on two device rows", len(pids) == 2 and len(by_cat(t, "kernel")) == 2 * OPS,
               (pids, len(by_cat(t, "kernel"))))
        expect("two devices: both rows named", sorted(procs.get((p, 0), "").split(" ")[0] for p in pids) ==
               ["fakert", "opencl"], {p: procs.get((p, 0)) for p in pids})
        ids = sorted(e["args"].get("External id") for e in by_cat(t, "kernel"))
        expect("two devices: every kernel linked to its op", ids == sorted([1001 + i for i in range(OPS)] * 2), ids)
    # only CPU activity asked for: no loom session at all
    loom_path = os.path.join(OUT, "cpu-only-loom.json")
    if os.path.exists(loom_path):
        os.unlink(loom_path)
    env = {"LOOM_PLUGINS": sim, "LOOM_KINETO_TRACE": loom_path}
    if layer:
        env["OPENCL_LAYERS"] = layer
    p, path = drive("cpu-only", "--types", "cpu", "--work", "opencl" if layer else "none", env=env)
    t = load(path)
    expect("CPU-only request: no loom session (no loom trace, no loom metadata)",
           not os.path.exists(loom_path) and "loom_devices" not in t)
    expect("CPU-only request: no device records", not device_work(t))
    # a backend that fails at start: said in the trace, the CPU trace saved
    p, path = drive("failstart", "--work", "none", env={"LOOM_PLUGINS": sim, "LOOM_SIM_FAIL": "start"})
    t = load(path)
    w = t.get("loom_warnings", [])
    expect("failing backend: in the trace's loom_warnings", any("failed to start" in x and "sim" in x for x in w), w)
    expect("failing backend: CPU ops still saved", cats(t).get("cpu_op") == OPS)
    # LOOM_DEVICES narrows the device types; one named with no backend is a warning
    if layer:
        p, path = drive("narrowed", "--work", "opencl",
                        env={"LOOM_PLUGINS": sim, "OPENCL_LAYERS": layer, "LOOM_DEVICES": "sim,nosuch"})
        t = load(path)
        expect("LOOM_DEVICES=sim,nosuch: only those recorded", t.get("loom_devices") == "sim,nosuch"
               and not device_work(t), (t.get("loom_devices"), cats(t)))
        w = t.get("loom_warnings", [])
        expect("LOOM_DEVICES=sim,nosuch: the missing one is a warning", any("nosuch" in x for x in w), w)
    # nothing loom can give for the request (no runtime of any backend here): no
    # session, nothing in the trace, no warning
    p, path = drive("nothing", "--work", "none")
    t = load(path)
    expect("nothing to give: no loom key in the trace", not [k for k in t if k.startswith("loom")],
           [k for k in t if k.startswith("loom")])
    expect("nothing to give: no message", "loom" not in p.stderr, p.stderr[-300:])
    # another loom session records this process (loom record): Kineto's trace says where
    # the device work went, and the CPU trace is saved
    rec = os.path.join(OUT, "recorded-by-loom.json")
    p, path = drive("busy", "--work", "none", env={"LOOM_PLUGINS": sim},
                    wrap=[E["LOOM_KINETO_TEST_LOOM"], "record", "--devices", "cpu", "-o", rec, "--"])
    t = load(path)
    w = t.get("loom_warnings", [])
    expect("under loom record: the trace says another loom session records", any("already recording" in x for x in w), w)
    expect("under loom record: CPU ops saved", cats(t).get("cpu_op") == OPS)
    expect("under loom record: loom record's own trace written", os.path.exists(rec))
    # libloom cannot be found: one clear message, Kineto goes on
    lone = os.path.join(OUT, "lone")
    os.makedirs(lone, exist_ok=True)
    copy = os.path.join(lone, "libloom-kineto.so")
    shutil.copy(BRIDGE, copy)
    env = {k: v for k, v in E.items() if k != "LD_LIBRARY_PATH"}
    p, path = drive("nolibloom", "--work", "none", bridge=copy, env={"LD_LIBRARY_PATH": ""})
    lines = [x for x in p.stderr.splitlines() if "loom" in x]
    expect("no libloom: kineto_drive ran", p.returncode == 0)
    expect("no libloom: one message naming libloom", len(lines) == 1 and "libloom.so.0" in lines[0], lines)
    expect("no libloom: register returned -LOOM_ENOTFOUND", "loom_kineto_register() = -5" in p.stdout, p.stdout)
    expect("no libloom: the CPU trace saved", cats(load(path)).get("cpu_op") == OPS)


def loading():
    """Registration with no code: LD_PRELOAD, and `import loom.kineto`."""
    sim = E["LOOM_KINETO_TEST_SIM"]
    fakert = {"FAKERT_LIB": E["LOOM_KINETO_TEST_FAKERT"], "FRT_TOOLS": E["LOOM_KINETO_TEST_FAKERT_PLUGIN"]}
    p, path = drive("preload", "--register", "none", "--work", "fakert", env=dict(fakert, LD_PRELOAD=BRIDGE))
    t = load(path)
    expect("LD_PRELOAD: registered, fakert's kernels in the trace", len(by_cat(t, "kernel")) == OPS, cats(t))
    if not E.get("LOOM_KINETO_TEST_PYTHON"):
        skip("the Python package was not built")
    lib = sysconfig.get_config_var("INSTSONAME")
    p, path = drive("python", "--register", "python", "--work", "fakert",
                    env=dict(fakert, KINETO_DRIVE_LIBPYTHON=lib, PYTHONPATH=E["LOOM_KINETO_TEST_PYTHON"]))
    expect("import loom.kineto: status 0", "loom.kineto.status = 0" in p.stdout, p.stdout + p.stderr)
    t = load(path)
    expect("import loom.kineto: fakert's kernels in the trace", len(by_cat(t, "kernel")) == OPS, cats(t))
    ids = [e["args"].get("External id") for e in by_cat(t, "kernel")]
    expect("import loom.kineto: linked to their ops", ids == [1001 + i for i in range(OPS)], ids)


os.makedirs(OUT, exist_ok=True)
{"opencl": mode_opencl, "vulkan": mode_vulkan, "fakert": mode_fakert, "edges": edges, "loading": loading}[MODE]()
print("FAILED" if failures else "PASSED", f"({failures} failures)")
sys.exit(1 if failures else 0)
