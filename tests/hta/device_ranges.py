#!/usr/bin/python3
"""Ranges a runtime records on a device that are not device work (CUPTI's
profiler ranges in Kineto's "cuda_profiler_range", counters in their
arguments) must not count as device work in `loom report`:

  /usr/bin/python3 device_ranges.py LOOM_BIN DATA_DIR

DATA_DIR is tests/data.  Checks HTA's cupti_profiler trace (77 such ranges
on GPU 0's process, no kernel: no device at all, the ranges listed as not
understood) and hand-made traces: a range of a category nobody knows tied
to nothing but a device process is not work beside a kernel on that
device; on the kernel's queue, or with a stream or a correlation id, it is
(docs/report.md, "Which events are device work").  Exits 1 on the first
figure that differs."""
import json
import os
import subprocess
import sys
import tempfile

loom, data = sys.argv[1], sys.argv[2]


def report(path, text=False):
    args = [loom, "report", path] + ([] if text else ["--json"])
    out = subprocess.run(args, check=True, capture_output=True, text=True).stdout
    return out if text else json.loads(out)


def expect(what, got, want):
    print(f"  {'ok ' if got == want else 'BAD'} {what}: {got!r} (want {want!r})")
    if got != want:
        sys.exit(1)


def not_understood(r):
    return {c["category"]: c["events"] for c in r["not_understood"]["categories"]}


def device(r, pid):
    return next((d for d in r["devices"] if d["pid"] == pid), None)


# HTA's cupti_profiler trace: GPU 0's process (deviceProperties, "GPU 0"
# label) holds 77 profiler ranges lasting 9350.187 ms and nothing else.
trace = os.path.join(data, "report/vendors/hta_cupti_profiler.json.gz")
print(trace)
r = report(trace)
expect("devices", r["devices"], [])
expect("kernels", r["kernels"]["top"], [])
expect("not understood", not_understood(r), {"cuda_profiler_range": 77})
expect("events read", r["input"]["events"], 2326)
expect("analysed (2322 when the ranges were taken for kernels)", r["input"]["analysed"], 2322 - 77)
expect("HTA's GPU events", r["hta"]["events"], 0)
expect("'100.00' in the text report", "100.00" in report(trace, text=True), False)

# Hand-made: device 0 (pid 0) runs kernel K [110, 130) on stream 7, launched
# at 100 (corr 1).  "prof_range" [100, 200) on tid 0 carries counters.
META = ('{"ph":"M","name":"process_labels","pid":0,"tid":0,"args":{"labels":"GPU 0"}},\n'
        '{"ph":"X","cat":"cuda_runtime","name":"cudaLaunchKernel","pid":10,"tid":10,"ts":100,"dur":4,'
        '"args":{"correlation":1}},\n'
        '{"ph":"X","cat":"kernel","name":"K","pid":0,"tid":7,"ts":110,"dur":20,'
        '"args":{"correlation":1,"stream":7}}')


def hand_made(extra):
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        f.write('{"deviceProperties":[{"id":0}],"traceEvents":[\n%s,\n%s\n]}\n' % (META, extra))
    try:
        return report(f.name)
    finally:
        os.unlink(f.name)


def prof(tid, args=""):
    return ('{"ph":"X","cat":"prof_range","name":"range 1","pid":0,"tid":%d,"ts":100,"dur":100,'
            '"args":{"sm__inst_executed.sum":4866048%s}}' % (tid, args))


print("a range on the device's process tied to nothing: not work")
r = hand_made(prof(0))
d = device(r, 0)
expect("work", d["work"], 1)
expect("busy_ns", d["busy_ns"], 20000)
expect("window_ns", d["window_ns"], 20000)
expect("not understood", not_understood(r), {"prof_range": 1})
expect("kernel names", [k["name"] for k in r["kernels"]["top"]], ["K"])

print("the same range after the kernel in the file: not work")
with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
    f.write('{"traceEvents":[\n%s,\n%s\n]}\n' % (prof(0), META))
try:
    r = report(f.name)
finally:
    os.unlink(f.name)
expect("work", device(r, 0)["work"], 1)
expect("not understood", not_understood(r), {"prof_range": 1})

print("on the kernel's queue (tid 7): work by its structure")
r = hand_made(prof(7))
d = device(r, 0)
expect("work", d["work"], 2)
expect("busy_ns", d["busy_ns"], 100000)
expect("not understood", not_understood(r), {})

print("with a stream: work by its structure")
r = hand_made(prof(0, ',"stream":3'))
expect("work", device(r, 0)["work"], 2)
expect("not understood", not_understood(r), {})

print("with a correlation id: work by its structure")
r = hand_made(prof(0, ',"correlation":9'))
expect("work", device(r, 0)["work"], 2)
expect("not understood", not_understood(r), {})
print("all figures match")
