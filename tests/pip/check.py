"""Run by tests/pip/pip.sh with a venv's python after `pip install .`, with no PYTHONPATH
or LD_LIBRARY_PATH: the package is the venv's, holds every .py of python/loom, uses the
libloom (and plug-in folder, Kineto bridge) it was built against, and records.
usage: check.py SOURCE_DIR LIBLOOM PLUGIN_DIR KINETO_BRIDGE|- TRACE_OUT"""
import collections
import glob
import json
import os
import subprocess
import sys
import sysconfig

src, libloom, plugin_dir, kineto, out = sys.argv[1:6]
assert "PYTHONPATH" not in os.environ and "LD_LIBRARY_PATH" not in os.environ

import loom  # noqa: E402 (after the environment check)

site = os.path.realpath(sysconfig.get_paths()["platlib"])
here = os.path.dirname(os.path.realpath(loom.__file__))
assert here == os.path.join(site, "loom"), (here, site)
assert sys.prefix != sys.base_prefix and here.startswith(os.path.realpath(sys.prefix))
assert os.path.realpath(loom._loom.__file__).startswith(here)
assert loom._loom.library == os.path.realpath(libloom), (loom._loom.library, libloom)
assert loom._loom.plugin_dir == plugin_dir, (loom._loom.plugin_dir, plugin_dir)

# Every .py of the source package, found rather than listed, and nothing else but the
# extension and the bridge's location.
pkg = os.path.join(src, "python", "loom")
want = {os.path.relpath(p, pkg) for p in glob.glob(os.path.join(pkg, "**", "*.py"),
                                                    recursive=True)}
want.add("_loom" + sysconfig.get_config_var("EXT_SUFFIX"))
if kineto != "-":
    want.add("_kineto_where.py")
    from loom._kineto_where import PATH
    assert PATH == kineto, (PATH, kineto)
got = {os.path.relpath(os.path.join(d, n), here) for d, _, ns in os.walk(here) for n in ns
       if "__pycache__" not in d}
assert got == want, (sorted(got ^ want))

STEPS, INNER = 4, 3
with loom.profile() as p:
    for i in range(STEPS):
        with loom.range("pip_step"):
            for j in range(INNER):
                with loom.range("pip_inner"):
                    loom.mark("pip_mark")
            loom.counter("pip_counter", i)
        p.step()
assert p.warnings() == [], p.warnings()
want = {("user_annotation", "pip_step"): STEPS, ("user_annotation", "pip_inner"): STEPS * INNER,
        ("cpu_instant_event", "pip_mark"): STEPS * INNER, ("counter", "pip_counter"): STEPS}
want.update({("user_annotation", "ProfilerStep#%d" % i): 1 for i in range(STEPS)})
p.trace.save(out)
for t in (p.trace, loom.load(out)):
    got = collections.Counter((e.cat, e.name) for e in t.events())
    assert got == want, (out, got)
if kineto != "-":  # loom.kineto finds the bridge beside that libloom, as from a build tree
    import loom.kineto
    assert (loom.kineto.path, loom.kineto.status) == (kineto, 0)

# What a trace viewer reads: trace_processor's counts, and no error it reports.
tp_dir = os.environ.get("LOOM_TP_DIR", "")
if not os.path.exists(os.path.join(tp_dir, "trace_processor.wasm")):
    if os.environ.get("LOOM_TP_REQUIRED") == "1":
        sys.exit("trace_processor missing in %r (tests/tp/setup.sh)" % tp_dir)
    print("check.py: trace_processor not installed: %s not checked with it" % out)
    sys.exit(0)
sqls = ["select name, count(*) as n from slice where name like 'pip%' group by name order by name",
        "select count(*) as n, sum(c.value) as total from counter c join counter_track t "
        "on c.track_id = t.id where t.name like 'pip_counter%'",
        "select name, value from stats where value > 0 and severity in ('error', 'data_loss')"]
r = subprocess.run(["node", os.path.join(src, "tests", "tp", "tp.mjs"), "--tp-dir", tp_dir, out]
                   + sqls, capture_output=True, text=True, timeout=120)
assert r.returncode == 0, r.stderr[-800:]
slices, counters, errors = json.loads(r.stdout)["results"]
assert slices == [{"name": "pip_inner", "n": 12}, {"name": "pip_mark", "n": 12},
                  {"name": "pip_step", "n": 4}], slices
assert counters == [{"n": 4, "total": 6}], counters
assert errors == [], errors
