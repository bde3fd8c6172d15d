"""Python multiprocessing under `loom record`: mp.py METHOD LIBLOOM.
Two children (start method METHOD: spawn, forkserver or fork); child i
records (i+1)*3 instants "child" through libloom (ctypes); the parent 2
instants "parent"."""
import ctypes
import multiprocessing as mp
import sys

lib = None


def instants(name, n):
    global lib
    if lib is None:
        lib = ctypes.CDLL(sys.argv[2])
        lib.loom_instant.argtypes = [ctypes.c_char_p]
    for _ in range(n):
        lib.loom_instant(name)


def child(i):
    instants(b"child", (i + 1) * 3)


if __name__ == "__main__":
    ctx = mp.get_context(sys.argv[1])
    procs = [ctx.Process(target=child, args=(i,)) for i in range(2)]
    for p in procs:
        p.start()
    instants(b"parent", 2)
    for p in procs:
        p.join()
    sys.exit(0 if all(p.exitcode == 0 for p in procs) else 1)
