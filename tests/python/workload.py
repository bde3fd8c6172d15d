"""An OpenCL workload (through ctypes: no loom inside) and a small PyTorch
training loop, in one "workload" range.

  workload.py plain            runs it (for `loom record`)
  workload.py api OUT          runs it inside loom.profile(devices=cpu,opencl,
                               torch_ops=True) and saves the trace to OUT
Prints "checksum N" of the OpenCL results either way.
"""
import ctypes
import sys

import loom  # before the first OpenCL call: the layer is set up at import

KERNELS = 6
N = 4096
SRC = b"__kernel void scale(__global float *a, float f) { size_t i = get_global_id(0); a[i] = a[i] * f + 1.0f; }"

cl = ctypes.CDLL("libOpenCL.so.1")
vp, u32, sz = ctypes.c_void_p, ctypes.c_uint32, ctypes.c_size_t
for name, res, args in [
        ("clGetPlatformIDs", ctypes.c_int, [u32, ctypes.POINTER(vp), ctypes.POINTER(u32)]),
        ("clGetDeviceIDs", ctypes.c_int, [vp, ctypes.c_uint64, u32, ctypes.POINTER(vp), ctypes.POINTER(u32)]),
        ("clCreateContext", vp, [vp, u32, ctypes.POINTER(vp), vp, vp, ctypes.POINTER(ctypes.c_int)]),
        ("clCreateCommandQueue", vp, [vp, vp, ctypes.c_uint64, ctypes.POINTER(ctypes.c_int)]),
        ("clCreateProgramWithSource", vp, [vp, u32, ctypes.POINTER(ctypes.c_char_p), ctypes.POINTER(sz), ctypes.POINTER(ctypes.c_int)]),
        ("clBuildProgram", ctypes.c_int, [vp, u32, ctypes.POINTER(vp), ctypes.c_char_p, vp, vp]),
        ("clCreateKernel", vp, [vp, ctypes.c_char_p, ctypes.POINTER(ctypes.c_int)]),
        ("clCreateBuffer", vp, [vp, ctypes.c_uint64, sz, vp, ctypes.POINTER(ctypes.c_int)]),
        ("clSetKernelArg", ctypes.c_int, [vp, u32, sz, vp]),
        ("clEnqueueWriteBuffer", ctypes.c_int, [vp, vp, u32, sz, sz, vp, u32, vp, vp]),
        ("clEnqueueReadBuffer", ctypes.c_int, [vp, vp, u32, sz, sz, vp, u32, vp, vp]),
        ("clEnqueueNDRangeKernel", ctypes.c_int, [vp, vp, u32, vp, ctypes.POINTER(sz), vp, u32, vp, vp]),
        ("clFinish", ctypes.c_int, [vp]),
        ("clReleaseKernel", ctypes.c_int, [vp]), ("clReleaseProgram", ctypes.c_int, [vp]),
        ("clReleaseMemObject", ctypes.c_int, [vp]), ("clReleaseCommandQueue", ctypes.c_int, [vp]),
        ("clReleaseContext", ctypes.c_int, [vp])]:
    f = getattr(cl, name)
    f.restype, f.argtypes = res, args


def check(rc, what):
    if rc != 0:
        raise RuntimeError("%s failed: %d" % (what, rc))


def opencl():
    plat, dev, n = vp(), vp(), u32()
    check(cl.clGetPlatformIDs(1, ctypes.byref(plat), ctypes.byref(n)), "clGetPlatformIDs")
    check(cl.clGetDeviceIDs(plat, 0xFFFFFFFF, 1, ctypes.byref(dev), None), "clGetDeviceIDs")
    err = ctypes.c_int()
    ctx = cl.clCreateContext(None, 1, ctypes.byref(dev), None, None, ctypes.byref(err))
    check(err.value, "clCreateContext")
    q = cl.clCreateCommandQueue(ctx, dev, 0, ctypes.byref(err))
    check(err.value, "clCreateCommandQueue")
    src = ctypes.c_char_p(SRC)
    prog = cl.clCreateProgramWithSource(ctx, 1, ctypes.byref(src), None, ctypes.byref(err))
    check(cl.clBuildProgram(prog, 0, None, b"", None, None), "clBuildProgram")
    k = cl.clCreateKernel(prog, b"scale", ctypes.byref(err))
    check(err.value, "clCreateKernel")
    host = (ctypes.c_float * N)(*range(N))
    buf = cl.clCreateBuffer(ctx, 1, N * 4, None, ctypes.byref(err))  # CL_MEM_READ_WRITE
    check(err.value, "clCreateBuffer")
    check(cl.clEnqueueWriteBuffer(q, buf, 1, 0, N * 4, host, 0, None, None), "write")
    factor = ctypes.c_float(0.5)
    check(cl.clSetKernelArg(k, 0, ctypes.sizeof(vp), ctypes.byref(vp(buf))), "arg 0")
    check(cl.clSetKernelArg(k, 1, 4, ctypes.byref(factor)), "arg 1")
    gsize = sz(N)
    for _ in range(KERNELS):
        check(cl.clEnqueueNDRangeKernel(q, k, 1, None, ctypes.byref(gsize), None, 0, None, None), "kernel")
    check(cl.clEnqueueReadBuffer(q, buf, 1, 0, N * 4, host, 0, None, None), "read")
    check(cl.clFinish(q), "clFinish")
    for f, o in [(cl.clReleaseMemObject, buf), (cl.clReleaseKernel, k), (cl.clReleaseProgram, prog),
                 (cl.clReleaseCommandQueue, q), (cl.clReleaseContext, ctx)]:
        f(o)
    return int(sum(host))


def torch_steps():
    import torch
    from torch import nn
    torch.manual_seed(0)
    torch.set_num_threads(1)
    model = nn.Sequential(nn.Linear(32, 16), nn.ReLU(), nn.Linear(16, 4))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x, y = torch.randn(8, 32), torch.randint(0, 4, (8,))
    for _ in range(3):
        with torch.autograd.profiler.record_function("train_step"):
            opt.zero_grad()
            nn.functional.cross_entropy(model(x), y).backward()
            opt.step()


def work():
    with loom.range("workload"):
        total = opencl()
        torch_steps()
    return total


if __name__ == "__main__":
    import torch  # noqa: F401  (imported before either run records)
    if sys.argv[1] == "api":
        with loom.profile(devices=["cpu", "opencl"], torch_ops=True) as p:
            total = work()
        p.trace.save(sys.argv[2])
    else:
        total = work()
    print("checksum", total)
