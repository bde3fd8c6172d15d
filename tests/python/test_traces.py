"""Traces: load, DataFrame, report, formats, freeing, backends, errors."""
import gzip
import json
import os
import subprocess

import pytest

import loom
from conftest import KINETO, LOOM

KINETO_FILES = sorted(f for f in os.listdir(KINETO) if f.endswith((".json", ".json.gz")))


def raw_events(path):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt") as f:
        return json.load(f)["traceEvents"]


@pytest.mark.parametrize("name", KINETO_FILES)
def test_kineto_dataframe_has_every_kernel(name):
    path = os.path.join(KINETO, name)
    kernels = sum(1 for e in raw_events(path) if e.get("cat") == "kernel" and e.get("ph") == "X")
    t = loom.load(path)
    df = t.df()
    assert len(df) == len(t)
    assert int((df.cat == "kernel").sum()) == kernels
    for col in ("ts", "dur", "name", "cat", "pid", "tid", "stream", "correlation", "external_id"):
        assert col in df.columns
    k = df[df.cat == "kernel"]
    assert (k.stream >= 0).all() and (df[df.device == -1].stream == -1).all()


def test_gpu_trace_kernel_count_is_known():
    t = loom.load(os.path.join(KINETO, "hta_gpu_simple_add.json.gz"))
    assert sum(1 for e in t.events() if e.kind == "kernel") > 0
    assert t.devices and all(d["pid"] >= 0 for d in t.devices)


def cli_json(*args):
    p = subprocess.run([LOOM, "report", "--json"] + list(args), capture_output=True, text=True,
                       timeout=120)
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout)


@pytest.mark.parametrize("name", ["hta_gpu_simple_add.json.gz", "libkineto_unit_test_trace.json"])
def test_report_equals_loom_report_json(name, tmp_path):
    path = os.path.join(KINETO, name)
    t = loom.load(path)
    assert t.report() == cli_json(path)
    assert t.report(top=0, include_last_step=True) == cli_json(path, "--all",
                                                               "--include-last-step")
    text = subprocess.run([LOOM, "report", path], capture_output=True, text=True).stdout
    assert t.table() == text
    html = str(tmp_path / "r.html")
    t.html(html)
    with open(html) as f:
        assert f.read(15).lower().startswith("<!doctype html")


def test_report_of_a_session_trace(tmp_path):
    with loom.profile() as p:
        for i in range(4):
            with loom.range("step body"):
                loom.step()
    saved = str(tmp_path / "s.pftrace")
    p.trace.save(saved)
    mine, cli = p.trace.report(), cli_json(saved)
    assert mine["input"].pop("path") != cli["input"].pop("path")  # a temporary copy
    assert mine == cli


@pytest.mark.parametrize("ext", [".json", ".json.gz", ".pftrace"])
def test_save_any_format_and_load_back(tmp_path, ext):
    with loom.profile() as p:
        with loom.range("a"):
            loom.mark("b")
    path = str(tmp_path / ("t" + ext))
    p.trace.save(path)
    back = loom.load(path)
    assert sorted(e.name for e in back.events()) == ["a", "b"]


def test_freed_deterministically_and_closed_access_raises():
    with loom.load(os.path.join(KINETO, "hta_triton_example.json.gz")) as t:
        assert len(t) > 0
    assert t.closed
    with pytest.raises(loom.Error) as e:
        len(t)
    assert e.value.status_name == "ESTATE" and "closed" in str(e.value)
    t2 = loom.load(os.path.join(KINETO, "hta_triton_example.json.gz"))
    t2.close()
    t2.close()  # idempotent


def test_backends_state_and_reason():
    b = {x["name"]: x for x in loom.backends()}
    assert b["opencl"]["state"] == "available" and b["opencl"]["reason"] == ""
    assert "kernel" in b["opencl"]["kinds"]
    assert b["levelzero"]["state"] == "unavailable" and b["levelzero"]["reason"]
    assert b["pytorch"]["needs_preload"] is True
    assert all(os.path.exists(x["origin"]) or x["origin"] == "built-in" for x in b.values())


# ---- every error path raises with loom's message -----------------------------------
def raises(status, fragment, fn, *args, **kw):
    with pytest.raises(loom.Error) as e:
        fn(*args, **kw)
    assert e.value.status_name == status, (e.value.status_name, str(e.value))
    assert fragment in str(e.value), str(e.value)
    return str(e.value)


def test_errors_carry_loom_messages(tmp_path):
    raises("EIO", "/no/such/file.json", loom.load, "/no/such/file.json")
    bad = tmp_path / "bad.json"
    bad.write_text('{"traceEvents": [ {"ph": "X", "name": ')
    msg = raises("EFORMAT", str(bad), loom.load, str(bad))
    assert "offset" in msg or "byte" in msg
    raises("EINVAL", "option wait='x': expected a number of steps",
           loom.profile(options={"wait": "x"}).start)
    raises("EINVAL", "needs active=N", loom.profile(schedule=loom.schedule(wait=1)).start)
    raises("EINVAL", "a schedule (wait/warmup/active/repeat) cannot be combined",
           loom.profile(options={"steps": 2}, schedule=loom.schedule(active=1)).start)
    raises("EINVAL", "memory_cap", loom.profile(options={"memory_cap": "lots"}).start)
    with loom.profile() as p:
        with loom.range("x"):
            pass
        raises("EBUSY", "another loom session exists", loom.profile().start)
    raises("EIO", "/no/such/dir", p.trace.save, "/no/such/dir/t.json")
    raises("EUNSUPPORTED", ".txt", p.trace.save, str(tmp_path / "t.txt"))
    raises("EIO", "/no/such/file.json", p.trace.report, more=["/no/such/file.json"])
    with pytest.raises(ValueError):
        loom.profile(kinds=["kernels"])
    with pytest.raises(TypeError):
        loom.range(3)


def test_error_message_is_the_clis(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text('{"traceEvents": [ {"ph": "X", "name": ')
    mine = raises("EFORMAT", "", loom.load, str(bad))
    cli = subprocess.run([LOOM, "report", str(bad)], capture_output=True, text=True)
    assert cli.returncode != 0 and mine in cli.stderr, (mine, cli.stderr)
