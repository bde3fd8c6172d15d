#!/usr/bin/python3
"""A hand-made trace shaped like loom's CUPTI output for tests/gpu/app.cu.

    make_trace.py OUT.json [FAULT]

Writes what `loom record` gives for app.cu (docs/formats.md: categories
kernel, gpu_memcpy, cuda_runtime, cuda_sync, cpu_op; args External id,
correlation, direction, graph id, graph node id; "ac2g" flows from each
runtime call to the device work it launched; device queues "stream N" on the
device's process), so tests/gpu/selftest.sh can check check.py without a
GPU.  FAULT makes one thing wrong, which check.py must notice:
  lost-kernel     one eager kernel missing
  lost-flow       one copy without its flow
  wrong-external  a graph kernel with External id 100 instead of 200
  no-graph-id     the graph kernels without "graph id"
  lost-sync       no Stream Wait Event record
  one-stream      every kernel on the same stream
  memory          one cudaFree's [memory] event missing, and one without its
                  call (loom_call generic)
"""
import json
import sys

HOST, TID, DEV = 4242, 4242, 0
events, flows = [], []
now = [1000.0]
corr = [0]


def tick(us=5.0):
    now[0] += us
    return now[0]


def x(cat, name, pid, tid, ts, dur, **args):
    e = {"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": tid,
         "ts": round(ts, 3), "dur": round(dur, 3)}
    if args:
        e["args"] = args
    events.append(e)
    return e


live = [0]


def memory(call_name, addr, nbytes, kind, on_device, ext=0):
    """A runtime call and its [memory] instant (nbytes < 0: a free)."""
    call(call_name, ext)
    live[0] += nbytes
    a = {"Device Type": int(on_device), "Device Id": DEV if on_device else -1, "Addr": addr,
         "Bytes": nbytes, "Total Allocated": live[0], "Total Reserved": 0,
         "loom_call": call_name, "loom_memory_kind": kind}
    events.append({"ph": "i", "s": "t", "cat": "cpu_instant_event", "name": "[memory]",
                   "pid": HOST, "tid": TID, "ts": round(now[0] + 1.0, 3), "args": a})


def call(name, ext, device_work=()):
    """A runtime call and the device work it launched, linked by flows."""
    corr[0] += 1
    c = corr[0]
    ts = tick()
    x("cuda_runtime", name, HOST, TID, ts, 3.0, **{"External id": ext, "correlation": c})
    for i, (cat, kname, stream, args) in enumerate(device_work):
        start = tick(10.0)
        a = {"External id": ext, "correlation": c, **args}
        x(cat, kname, DEV, stream, start, 4.0, **a)
        fid = len(flows) + 1
        flows.append({"ph": "s", "cat": "ac2g", "name": "ac2g", "id": fid, "pid": HOST,
                      "tid": TID, "ts": round(ts, 3)})
        flows.append({"ph": "f", "cat": "ac2g", "name": "ac2g", "id": fid, "pid": DEV,
                      "tid": stream, "ts": round(start, 3), "bp": "e"})
    return c


def main():
    out = sys.argv[1]
    fault = sys.argv[2] if len(sys.argv) > 2 else ""
    streams = [13, 14] if fault != "one-stream" else [13, 13]
    kernels = ["scale(float*, float, int)", "add(float*, float, int)", "square(float*, int)"]
    buf = 262144
    for i in range(2):
        memory("cudaMallocHost", 0x200000000 + i * buf, buf, "host_pinned", False)
        memory("cudaMalloc", 0x7f0000000000 + i * buf, buf, "device", True)
    memory("cudaMallocManaged", 0x7e0000000000, 1 << 20, "shared", True)
    memory("cudaMalloc", 0x7d0000000000, 4096, "device", True)
    op = x("cpu_op", "step", HOST, TID, tick(), 0, **{"External id": 100})
    for i, s in enumerate(streams):
        call("cudaMemcpyAsync", 100, [("gpu_memcpy", "Memcpy HtoD (Pinned -> Device)", s,
                                       {"bytes": 262144, "direction": "HtoD"})])
        for k in range(3):
            if fault == "lost-kernel" and i == 1 and k == 2:
                call("cudaLaunchKernel", 100)
                continue
            call("cudaLaunchKernel", 100, [("kernel", kernels[k], s, {"grid": "[256, 1, 1]"})])
        if i == 0:
            call("cudaEventRecord", 100)
            c = call("cudaStreamWaitEvent", 100)
            if fault != "lost-sync":
                x("cuda_sync", "Stream Wait Event", DEV, streams[1], tick(), 1.0, correlation=c)
        copy = call("cudaMemcpyAsync", 100, [("gpu_memcpy", "Memcpy DtoH (Device -> Pinned)", s,
                                              {"bytes": 262144, "direction": "DtoH"})])
        if fault == "lost-flow" and i == 1:
            del flows[-2:]
    c = call("cudaEventSynchronize", 100)
    x("cuda_sync", "Event Sync", DEV, streams[0], tick(), 1.0, correlation=c)
    op["dur"] = round(tick() - op["ts"], 3)
    for k in range(2):  # the captured launches: no device work of their own
        call("cudaLaunchKernel", 0)
    gop = x("cpu_op", "graph step", HOST, TID, tick(), 0, **{"External id": 200})
    graph = {} if fault == "no-graph-id" else {"graph id": 7}
    work = []
    for k in range(2):
        ext_args = dict(graph)
        if graph:
            ext_args["graph node id"] = 90 + k
        work.append(("kernel", kernels[k], streams[0], ext_args))
    call("cudaGraphLaunch", 200, work)
    if fault == "wrong-external":
        events[-1]["args"]["External id"] = 100
    gop["dur"] = round(tick() - gop["ts"], 3)
    for s in sorted(set(streams)):
        c = call("cudaStreamSynchronize", 0)
        x("cuda_sync", "Stream Sync", DEV, s, tick(), 1.0, correlation=c)
    c = call("cudaDeviceSynchronize", 0)
    x("cuda_sync", "Context Sync", HOST, TID, tick(), 1.0, correlation=c)
    memory("cudaFree", 0x7e0000000000, -(1 << 20), "shared", True)
    for i in range(2):
        if not (fault == "memory" and i == 1):
            memory("cudaFree", 0x7f0000000000 + i * buf, -buf, "device", True)
        memory("cudaFreeHost", 0x200000000 + i * buf, -buf, "host_pinned", False)
    if fault == "memory":
        events[-1]["args"]["loom_call"] = "CUDA memory release"
    meta = [
        {"ph": "M", "name": "process_name", "pid": HOST, "tid": 0, "args": {"name": "app"}},
        {"ph": "M", "name": "process_name", "pid": DEV, "tid": 0,
         "args": {"name": "NVIDIA Hand-made GPU"}},
        {"ph": "M", "name": "process_labels", "pid": DEV, "tid": 0, "args": {"labels": "cuda 0"}},
        {"ph": "M", "name": "thread_name", "pid": HOST, "tid": TID, "args": {"name": "app"}},
    ] + [{"ph": "M", "name": "thread_name", "pid": DEV, "tid": s, "args": {"name": f"stream {s}"}}
         for s in sorted(set(streams))]
    trace = {"schemaVersion": 1,
             "deviceProperties": [{"id": DEV, "name": "NVIDIA Hand-made GPU", "vendor": "NVIDIA",
                                   "type": "gpu", "deviceType": "cuda", "backend": "cupti"}],
             "displayTimeUnit": "ms", "baseTimeNanoseconds": 1700000000000000000,
             "traceEvents": meta + events + flows, "traceName": "hand-made app.cu"}
    with open(out, "w") as f:
        json.dump(trace, f, indent=0)
    return 0


if __name__ == "__main__":
    sys.exit(main())
