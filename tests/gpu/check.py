#!/usr/bin/python3
"""Checks a trace of tests/gpu/app.cu recorded by `loom record` (CUPTI).

    check.py [--tp TP_MJS] TRACE

TRACE: .json, .json.gz or .pftrace; read by Perfetto's trace_processor
(tests/tp/tp.mjs).  The expected figures follow from what app.cu does (keep
them in step with it); every one is exact.  Prints a table (check, expected,
got) and exits 0 when all match, 1 otherwise, 2 when the trace cannot be
read.  Runs on any machine: tests/gpu/selftest.sh checks this checker on a
hand-made trace shaped like loom's CUPTI output (make_trace.py).
"""
import json
import os
import subprocess
import sys

STREAMS = 2
KERNELS_PER_STREAM = 3
GRAPH_KERNELS = 2
EAGER_KERNELS = STREAMS * KERNELS_PER_STREAM
COPIES_EACH_WAY = STREAMS
BUFFER_BYTES = 4 * (1 << 16)   # N floats
MANAGED_BYTES = 1 << 20
LEAK_BYTES = 4096

# trace_processor keeps JSON arguments under "args.", protobuf ones under "debug."
def arg(name, s="s"):
    return (f"coalesce(extract_arg({s}.arg_set_id, 'args.{name}'), "
            f"extract_arg({s}.arg_set_id, 'debug.{name}'))")


DEVICE_WORK = "category in ('kernel', 'gpu_memcpy', 'gpu_memset')"


# A memory event: in .json Kineto's [memory] instant (the call in loom_call, Bytes negative on a
# free); in .pftrace an instant named after its call, marked alloc or free (docs/formats.md).
IS_MEM = f"(s.name = '[memory]' or {arg('loom_role')} in ('alloc', 'free'))"
MEM_CALL = f"coalesce({arg('loom_call')}, s.name)"


def mem(call, signed_bytes, kind, device_type):
    """The memory events of call with its bytes (negative: a free), kind and device or none."""
    role = "alloc" if signed_bytes > 0 else "free"
    as_json = (f"(s.name = '[memory]' and {arg('loom_call')} = '{call}' and "
               f"{arg('Bytes')} = {signed_bytes} and {arg('loom_memory_kind')} = '{kind}' and "
               f"{arg('Device Type')} = {device_type})")
    as_pftrace = (f"(s.name = '{call}' and s.dur = 0 and {arg('loom_role')} = '{role}' and "
                  f"{arg('bytes')} = {abs(signed_bytes)} and {arg('memory_kind')} = '{kind}' and "
                  f"({arg('device')} is not null) = {device_type})")
    return f"select count(*) as n from slice s where {as_json} or {as_pftrace}"


CHECKS = [
    ("kernels", EAGER_KERNELS + GRAPH_KERNELS,
     "select count(*) as n from slice where category = 'kernel'"),
    ("kernel streams", STREAMS,
     "select count(distinct track_id) as n from slice where category = 'kernel'"),
    ("copies HtoD", COPIES_EACH_WAY,
     f"select count(*) as n from slice s where category = 'gpu_memcpy' and {arg('direction')} = 'HtoD'"),
    ("copies DtoH", COPIES_EACH_WAY,
     f"select count(*) as n from slice s where category = 'gpu_memcpy' and {arg('direction')} = 'DtoH'"),
    ("other copies", 0,
     f"select count(*) as n from slice s where category = 'gpu_memcpy' and "
     f"coalesce({arg('direction')}, '') not in ('HtoD', 'DtoH')"),
    ("kernel launch calls", EAGER_KERNELS + GRAPH_KERNELS,  # the captured ones too
     "select count(*) as n from slice where category = 'cuda_runtime' and name = 'cudaLaunchKernel'"),
    ("graph launch calls", 1,
     "select count(*) as n from slice where category = 'cuda_runtime' and name = 'cudaGraphLaunch'"),
    ("flows call -> device work", EAGER_KERNELS + GRAPH_KERNELS + 2 * COPIES_EACH_WAY,
     f"select count(*) as n from flow f join slice o on o.id = f.slice_out "
     f"join slice i on i.id = f.slice_in where o.category = 'cuda_runtime' and i.{DEVICE_WORK}"),
    ("flows into the graph's kernels", GRAPH_KERNELS,
     f"select count(*) as n from flow f join slice o on o.id = f.slice_out "
     f"join slice i on i.id = f.slice_in where o.name = 'cudaGraphLaunch' and "
     f"{arg('graph id', 'i')} is not null"),
    ("device work without a flow", 0,
     f"select count(*) as n from slice s where s.{DEVICE_WORK} and "
     f"not exists (select 1 from flow f where f.slice_in = s.id)"),
    ("op 'step' (External id 100)", 1,
     f"select count(*) as n from slice s where category = 'cpu_op' and name = 'step' and "
     f"{arg('External id')} = 100"),
    ("op 'graph step' (External id 200)", 1,
     f"select count(*) as n from slice s where category = 'cpu_op' and name = 'graph step' and "
     f"{arg('External id')} = 200"),
    ("device work with External id 100", EAGER_KERNELS + 2 * COPIES_EACH_WAY,
     f"select count(*) as n from slice s where s.{DEVICE_WORK} and {arg('External id')} = 100"),
    ("device work with External id 200", GRAPH_KERNELS,
     f"select count(*) as n from slice s where s.{DEVICE_WORK} and {arg('External id')} = 200"),
    ("kernels with a graph id", GRAPH_KERNELS,
     f"select count(*) as n from slice s where category = 'kernel' and {arg('graph id')} is not null"),
    ("distinct graph ids", 1,
     f"select count(distinct {arg('graph id')}) as n from slice s where category = 'kernel'"),
    ("graph kernels with a graph node id", GRAPH_KERNELS,
     f"select count(distinct {arg('graph node id')}) as n from slice s where category = 'kernel' "
     f"and {arg('graph id')} is not null"),
    ("sync: Event Sync", 1,
     "select count(*) as n from slice where category = 'cuda_sync' and name = 'Event Sync'"),
    ("sync: Stream Wait Event", 1,
     "select count(*) as n from slice where category = 'cuda_sync' and name = 'Stream Wait Event'"),
    ("sync: Stream Sync", STREAMS,
     "select count(*) as n from slice where category = 'cuda_sync' and name = 'Stream Sync'"),
    ("sync: Context Sync", 1,
     "select count(*) as n from slice where category = 'cuda_sync' and name = 'Context Sync'"),
    # memory: Kineto's [memory] instants, named by their call in loom_call
    ("memory: cudaMalloc of a buffer", STREAMS, mem("cudaMalloc", BUFFER_BYTES, "device", 1)),
    ("memory: cudaMalloc leaked", 1, mem("cudaMalloc", LEAK_BYTES, "device", 1)),
    ("memory: cudaMallocHost", STREAMS, mem("cudaMallocHost", BUFFER_BYTES, "host_pinned", 0)),
    ("memory: cudaMallocManaged", 1, mem("cudaMallocManaged", MANAGED_BYTES, "shared", 1)),
    ("memory: cudaFree of a buffer", STREAMS, mem("cudaFree", -BUFFER_BYTES, "device", 1)),
    ("memory: cudaFree of the managed one", 1, mem("cudaFree", -MANAGED_BYTES, "shared", 1)),
    ("memory: cudaFreeHost", STREAMS, mem("cudaFreeHost", -BUFFER_BYTES, "host_pinned", 0)),
    ("memory: records without their call", 0,
     f"select count(*) as n from slice s where {IS_MEM} and "
     f"coalesce({MEM_CALL}, '') in ('', '[memory]', 'CUDA memory allocation', "
     f"'CUDA memory release')"),
    ("memory: on another thread than their call", 0,
     f"select count(*) as n from slice s join thread_track tt on s.track_id = tt.id "
     f"where {IS_MEM} and {MEM_CALL} like 'cuda%' and not exists "
     f"(select 1 from slice c join thread_track ct on c.track_id = ct.id where "
     f"c.category = 'cuda_runtime' and c.name = {MEM_CALL} and ct.utid = tt.utid)"),
    ("trace_processor error kinds", 0,
     "select count(*) as n from stats where value > 0 and severity in ('error', 'data_loss')"),
]


def main():
    args = sys.argv[1:]
    tp = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tp", "tp.mjs")
    if len(args) >= 2 and args[0] == "--tp":
        tp, args = args[1], args[2:]
    if len(args) != 1:
        print(__doc__)
        return 2
    r = subprocess.run(["node", tp, args[0], *[c[2] for c in CHECKS]],
                       capture_output=True, text=True, timeout=600)
    if r.returncode != 0:
        print(f"check.py: trace_processor cannot read {args[0]}: {r.stderr.strip()}")
        return 2
    res = json.loads(r.stdout)["results"]
    bad = 0
    width = max(len(c[0]) for c in CHECKS)
    print(f"{'check':<{width}}  expected  got   ")
    for (name, want, _), rows in zip(CHECKS, res):
        got = rows[0]["n"] if rows else None
        ok = got == want
        bad += not ok
        print(f"{name:<{width}}  {want:>8}  {str(got):>5}  {'ok' if ok else 'FAIL'}")
    print(f"{args[0]}: {len(CHECKS) - bad} of {len(CHECKS)} checks pass")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
