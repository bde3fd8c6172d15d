"""Objects free their C side at garbage collection, not only when closed:
traces and sessions made in a loop and dropped without close() or `with`,
in reference cycles too; loom._loom._live() counts the C objects alive and
the process's resident memory must not grow with the loop."""
import gc
import os
import pytest

import loom
from conftest import KINETO

TRITON = os.path.join(KINETO, "hta_triton_example.json.gz")


def live():
    return loom._loom._live()


def rss_kib():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise AssertionError("no VmRSS in /proc/self/status")


def recorded_trace(ranges):
    """A session made and stopped without a context manager: its trace."""
    p = loom.profile(devices=["cpu"], kinds=["user_range"])
    p.start()
    r = loom.range("work")
    for _ in range(ranges):
        with r:
            pass
    return p.stop()


def test_dropped_traces_free_their_c_side():
    gc.collect()
    base = live()
    for _ in range(50):
        t = loom.load(TRITON)
        assert len(t) > 0
    assert live()["traces"] == base["traces"] + 1  # the last one is still referenced
    del t
    assert live() == base


def test_traces_in_reference_cycles_are_collected():
    gc.collect()
    base = live()
    for _ in range(20):
        t = loom.load(TRITON)
        t.me = t  # a cycle: only the collector frees it
    del t
    assert live()["traces"] == base["traces"] + 20
    gc.collect()
    assert live() == base


def test_sessions_dropped_without_stop_are_destroyed():
    gc.collect()
    base = live()
    for _ in range(5):
        p = loom.profile(devices=["cpu"])
        p.start()  # recording, never stopped: destroyed when collected
        loom.mark("x")
        del p
    gc.collect()
    assert live() == base
    with loom.profile() as p:  # and a new one can start: none is left recording
        loom.mark("after")
    assert [e.name for e in p.trace.events()] == ["after"]


def test_session_with_a_window_callback_is_collected():
    """The session holds the profile's callback and the profile the session:
    a cycle the collector must see."""
    gc.collect()
    base = live()
    got = []
    for _ in range(5):
        p = loom.profile(schedule=loom.schedule(wait=0, warmup=0, active=2, repeat=1),
                         on_trace_ready=got.append)
        p.start()
        p.step()
        del p
        gc.collect()  # the next start() needs this one gone
        assert live()["sessions"] == base["sessions"]
    del got[:]
    gc.collect()
    assert live() == base


@pytest.mark.skipif("asan" in os.environ.get("LD_PRELOAD", ""),
                    reason="AddressSanitizer's allocator keeps freed memory in quarantine: "
                           "the process's RSS says nothing of what loom frees")
def test_memory_does_not_grow_with_dropped_traces():
    gc.collect()
    base = live()
    recorded_trace(100000)  # the allocator's pools, warmed up
    gc.collect()
    before = rss_kib()
    t = recorded_trace(100000)
    one = rss_kib() - before  # what one kept trace costs
    del t
    assert one > 2000, one  # 100,000 ranges: several MiB, or the check proves nothing
    gc.collect()
    before = rss_kib()
    for _ in range(10):
        t = recorded_trace(100000)
        n = len(t)
    assert n == 100000
    del t
    gc.collect()
    grown = rss_kib() - before
    # ten traces kept would be ten times `one`; freed, at most a fraction of one
    assert grown < 2 * one, (grown, one)
    assert live() == base
