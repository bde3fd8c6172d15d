"""loom.diff: `loom diff` from Python, the same document as the CLI's."""
import json
import os
import subprocess

import pytest

import loom
from conftest import KINETO, LOOM

BASE = os.path.join(KINETO, "hta_trace_compare_base.json.gz")
NEW = os.path.join(KINETO, "hta_trace_compare_test.json.gz")


def cli(*args):
    p = subprocess.run([LOOM, "diff", BASE, NEW] + list(args), capture_output=True, text=True,
                       timeout=120)
    assert p.returncode == 0, p.stderr
    return p.stdout


def test_diff_equals_loom_diff_json(tmp_path):
    assert loom.diff(BASE, NEW) == json.loads(cli("--json", "--all"))
    assert loom.diff(BASE, NEW, step=1010, top=5) == json.loads(cli("--json", "--step", "1010",
                                                                     "--top", "5"))
    assert loom.diff(BASE, NEW, format="text", top=20) == cli()
    page = tmp_path / "d.html"
    loom.diff([BASE], [NEW], html=page)
    assert page.read_text().lower().startswith("<!doctype html")


def test_diff_of_trace_objects_and_options():
    d = loom.diff(loom.load(BASE), loom.load(NEW), steps=(1010, 1010), min_change=0.5,
                  min_share=-1)
    assert d["test"]["min_change_pct"] == 50 and d["test"]["min_share_pct"] == 0
    ops = {r["name"]: r for r in d["names"]["ops"]}
    assert ops["All2All_Pooled_Req"]["new"]["total_ns"] == 311000
    assert [r["name"] for r in d["appeared"]] == ["All2All_Pooled_Req", "AddmmBackward0",
                                                  "CatBackward0"]


def test_diff_errors():
    with pytest.raises(loom.Error, match="no step numbered 7"):
        loom.diff(BASE, NEW, step=7)
    with pytest.raises(loom.Error):
        loom.diff("/nonexistent/trace.json", NEW)
