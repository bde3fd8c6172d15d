"""Shared settings of the Python package's tests (run by ctest: see
tests/CMakeLists.txt, which sets the environment below)."""
import json
import os
import subprocess

import pytest

LOOM = os.environ.get("LOOM_BIN", "loom")
HERE = os.path.dirname(os.path.abspath(__file__))
TESTS = os.path.dirname(HERE)
KINETO = os.path.join(TESTS, "data", "kineto")
TP_DIR = os.environ.get("LOOM_TP_DIR", os.path.expanduser("~/.cache/loom-tp"))


def tp_query(path, *sqls):
    """trace_processor's answers (tests/tp/tp.mjs), or skips when it is not
    installed (a failure with LOOM_TP_REQUIRED=1)."""
    if not os.path.exists(os.path.join(TP_DIR, "trace_processor.wasm")):
        if os.environ.get("LOOM_TP_REQUIRED") == "1":
            pytest.fail("trace_processor missing in %s (tests/tp/setup.sh)" % TP_DIR)
        pytest.skip("trace_processor not installed (tests/tp/setup.sh)")
    p = subprocess.run(["node", os.path.join(TESTS, "tp", "tp.mjs"), "--tp-dir", TP_DIR, path]
                       + list(sqls), capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr[-800:]
    return json.loads(p.stdout)["results"]


TP_ERRORS = ("select name, value from stats where value > 0 and "
             "severity in ('error', 'data_loss')")
