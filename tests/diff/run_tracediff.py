#!/usr/bin/python3
"""Runs the real Holistic Trace Analysis's TraceDiff.compare_traces (from
its source tree) on a control and a test trace folder and writes its
figures per device type, for tests/diff/hta.py to compare `loom diff` with
(the stored ones: tests/data/diff/hta_*.json):

  /usr/bin/python3 run_tracediff.py HTA_SOURCE_DIR CONTROL_DIR TEST_DIR ITER_C ITER_T OUT.json

ITER_C, ITER_T: comma-separated iterations, or - for HTA's default (the
first).  HTA needs pandas; plotly and networkx, which TraceDiff imports
only to draw, are stood in for by empty modules."""
import json
import logging
import sys
import types

sys.path.insert(0, sys.argv[1])
for m in ["plotly", "plotly.graph_objects", "plotly.express", "networkx"]:
    sys.modules.setdefault(m, types.ModuleType(m))
sys.modules["plotly"].graph_objects = sys.modules["plotly.graph_objects"]
sys.modules["plotly"].express = sys.modules["plotly.express"]
logging.disable(logging.WARNING)
from hta.trace_diff import DeviceType, LabeledTrace, TraceDiff  # noqa: E402

ctl, tst, it_c, it_t, out = sys.argv[2:7]
c = LabeledTrace(label="control", trace_dir=ctl)
t = LabeledTrace(label="test", trace_dir=tst)
res = {"iterations": [c.iterations(), t.iterations()], "ranks": [c.ranks(), t.ranks()]}
ic = None if it_c == "-" else [int(x) for x in it_c.split(",")]
itt = None if it_t == "-" else [int(x) for x in it_t.split(",")]
for dt in ["CPU", "GPU"]:
    df = TraceDiff.compare_traces(c, t, None, None, ic, itt, getattr(DeviceType, dt))
    res[dt] = json.loads(df.to_json(orient="index"))
with open(out, "w") as f:
    json.dump(res, f, separators=(",", ":"), sort_keys=True)
