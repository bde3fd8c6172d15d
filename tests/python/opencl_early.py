"""OpenCL used before `import loom` (`early`: one clGetPlatformIDs first) or
only loaded before it (`loaded`), then the OpenCL workload profiled through
loom.profile(devices=["cpu", "opencl"]).  Prints one JSON line: the trace's
categories and warnings, the LoomWarnings issued, loom.backends()' opencl."""
import collections
import ctypes
import json
import sys
import warnings

cl = ctypes.CDLL("libOpenCL.so.1")
if sys.argv[1] == "early":
    n = ctypes.c_uint32()
    assert cl.clGetPlatformIDs(0, None, ctypes.byref(n)) == 0 and n.value > 0

import loom  # noqa: E402  (after the program's first OpenCL call)
import workload  # noqa: E402

with warnings.catch_warnings(record=True) as issued:
    warnings.simplefilter("always")
    with loom.profile(devices=["cpu", "opencl"]) as p:
        total = workload.opencl()
opencl = [b for b in loom.backends() if b["name"] == "opencl"][0]
print(json.dumps({"cats": collections.Counter(e.cat for e in p.trace.events()),
                  "trace_warnings": p.trace.warnings,
                  "issued": [str(w.message) for w in issued if w.category is loom.LoomWarning],
                  "state": opencl["state"], "reason": opencl["reason"], "checksum": total}))
