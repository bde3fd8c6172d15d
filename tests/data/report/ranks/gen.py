#!/usr/bin/python3
"""Writes the 4-rank, 5-step trace of the cross-rank tests, merged (merged.json:
one process per rank, named "rank R: ...") and one file per rank (rank0.json ..
rank3.json, with Kineto's distributedInfo).  Times are integer microseconds.

Every step s (1..5) starts at (s-1) * 400 ms on every rank; in it each rank runs
  compute 10 ms, MPI_Barrier, compute 10 ms, MPI_Allreduce, compute 10 ms,
  a ring: MPI_Irecv from r-1, MPI_Isend to r+1, MPI_Waitall (completing the
  receive: an MPI_Recv_complete instant at its end),
and the step ends 1 ms after the Waitall.  A collective leaves 0.1 ms (barrier)
or 0.2 ms (allreduce) after the last rank entered; a Waitall leaves 0.05 ms
after the later of its own enter and its sender's Isend enter.  In step 3
rank 2 computes 50 ms longer before each of the three (the late rank).
Hand-worked answers are in tests/test_report.c (test_ranks_*).

  /usr/bin/python3 gen.py OUTDIR
"""
import json
import os
import sys

BASE = 1000000  # us
LATE = 50000
N, STEPS = 4, 5


def events():
    ev = {r: [] for r in range(N)}
    seq = 0
    for s in range(1, STEPS + 1):
        t = BASE + (s - 1) * 400000
        d = {r: (LATE if (s == 3 and r == 2) else 0) for r in range(N)}
        enter = {r: t + 10000 + d[r] for r in range(N)}
        leave = max(enter.values()) + 100
        for r in range(N):
            ev[r].append(("X", "mpi", "MPI_Barrier", enter[r], leave - enter[r],
                          {"comm": 0, "comm_size": N, "comm_rank": r, "seq": seq, "bytes": 0}))
        seq += 1
        enter = {r: leave + 10000 + d[r] for r in range(N)}
        leave = max(enter.values()) + 200
        for r in range(N):
            ev[r].append(("X", "mpi", "MPI_Allreduce", enter[r], leave - enter[r],
                          {"comm": 0, "comm_size": N, "comm_rank": r, "seq": seq, "bytes": 8}))
        seq += 1
        t0 = {r: leave + 10000 + d[r] for r in range(N)}
        wait_leave = {}
        for r in range(N):
            src = (r - 1) % N
            wait_leave[r] = max(t0[r] + 40, t0[src] + 20) + 50
        for r in range(N):
            src, dst = (r - 1) % N, (r + 1) % N
            ev[r].append(("X", "mpi", "MPI_Irecv", t0[r], 10, {"comm": 0, "comm_size": N, "comm_rank": r,
                                                                 "request": s}))
            ev[r].append(("X", "mpi", "MPI_Isend", t0[r] + 20, 10, {"comm": 0, "comm_size": N, "comm_rank": r,
                                                                      "dst": dst, "tag": 7, "bytes": 8}))
            ev[r].append(("X", "mpi", "MPI_Waitall", t0[r] + 40, wait_leave[r] - t0[r] - 40, {}))
            ev[r].append(("i", "mpi", "MPI_Recv_complete", wait_leave[r], 0,
                          {"src": src, "recv_tag": 7, "recv_bytes": 8, "comm": 0, "request": s,
                           "wait_start_ns": (t0[r] + 40) * 1000}))
            ev[r].append(("X", "user_annotation", "ProfilerStep#%d" % s, t, wait_leave[r] + 1000 - t, {}))
    return ev


def line(pid, e):
    ph, cat, name, ts, dur, args = e
    o = {"ph": ph, "cat": cat, "name": name, "pid": pid, "tid": 1, "ts": ts}
    if ph == "X":
        o["dur"] = dur
    else:
        o["s"] = "t"
    if args:
        o["args"] = args
    return json.dumps(o)


def write(path, procs, info=None):
    with open(path, "w") as f:
        f.write('{"schemaVersion": 1,')
        if info is not None:
            f.write(' "distributedInfo": %s,' % json.dumps(info))
        f.write(' "traceEvents": [\n')
        rows = []
        for pid, name, evs in procs:
            rows.append(json.dumps({"ph": "M", "name": "process_name", "pid": pid, "args": {"name": name}}))
            rows += [line(pid, e) for e in sorted(evs, key=lambda e: (e[3], -e[4]))]
        f.write(",\n".join(rows))
        f.write("\n]}\n")


def rooted():
    """rooted.json: 3 ranks, one step [0, 70 ms): MPI_Bcast (root 0 late),
    MPI_Reduce (root 1 early), MPI_Ssend 2 -> 0 received late, MPI_Send 1 -> 2
    that returned before its receive was posted (eager: no Late Receiver)."""
    ms = 1000
    c = lambda r, seq, root: {"comm": 0, "comm_size": 3, "comm_rank": r, "seq": seq, "root": root}
    ev = {r: [("X", "user_annotation", "ProfilerStep#1", BASE, 70 * ms, {})] for r in range(3)}
    for r, t in ((0, 20 * ms), (1, 10 * ms), (2, 15 * ms)):
        ev[r].append(("X", "mpi", "MPI_Bcast", BASE + t, 20 * ms + 100 - t, c(r, 0, 0)))
    for r, t, end in ((1, 30 * ms, 37 * ms + 100), (0, 34 * ms, 34 * ms + 50), (2, 37 * ms, 37 * ms + 50)):
        ev[r].append(("X", "mpi", "MPI_Reduce", BASE + t, end - t, c(r, 1, 1)))
    p2p = {"comm": 0, "comm_size": 3}
    ev[2].append(("X", "mpi", "MPI_Ssend", BASE + 40 * ms, 7 * ms + 100, dict(p2p, dst=0, tag=1, bytes=8)))
    ev[0].append(("X", "mpi", "MPI_Recv", BASE + 47 * ms, 200, dict(p2p, src=2, recv_tag=1, recv_bytes=8)))
    ev[1].append(("X", "mpi", "MPI_Send", BASE + 50 * ms, 10, dict(p2p, dst=2, tag=1, bytes=8)))
    ev[2].append(("X", "mpi", "MPI_Recv", BASE + 60 * ms, 10, dict(p2p, src=1, recv_tag=1, recv_bytes=8)))
    return ev


def chain():
    """chain.json: what the MPI backend writes (category "mpi", every call
    with its "loom_role" marks), 4 ranks.  Step 1 [0, 100 ms): each rank
    Irecv from r-1 and Isend to r+1 at 10 ms (rank 2: at 60 ms, it computes
    50 ms longer), Waitall 40 us after its Irecv, leaving 50 us after the
    later of its enter and its sender's Isend; then each computes 0.1 ms
    (rank 2: 0.05) and enters an MPI_Allreduce, except ranks 0 and 1, which
    need nothing from rank 2 and enter it at 20 ms; it leaves 0.2 ms after
    the last enter.  Step 2 [100, 200 ms): rank 0 completes a receive from
    rank 1 (Isend at 150 ms) with an MPI_Test [120, 150.2) that does not wait."""
    ms = 1000
    role = {"MPI_Irecv": "comm,post", "MPI_Isend": "comm,send", "MPI_Waitall": "comm,wait",
            "MPI_Recv_complete": "comm,recv", "MPI_Allreduce": "comm,nxn", "MPI_Test": "comm"}
    ev = {r: [("X", "user_annotation", "ProfilerStep#%d" % s, BASE + (s - 1) * 100 * ms, 100 * ms, {})
              for s in (1, 2)] for r in range(N)}

    def call(r, ph, name, ts, dur, args):
        ev[r].append((ph, "mpi", name, BASE + ts, dur, dict(args, loom_role=role[name])))

    t0 = {r: (60 if r == 2 else 10) * ms for r in range(N)}
    leave = {r: max(t0[r] + 40, t0[(r - 1) % N] + 20) + 50 for r in range(N)}
    for r in range(N):
        src, dst = (r - 1) % N, (r + 1) % N
        c = {"comm": 0, "comm_size": N, "comm_rank": r}
        call(r, "X", "MPI_Irecv", t0[r], 10, dict(c, src=src, tag=7, request=1))
        call(r, "X", "MPI_Isend", t0[r] + 20, 10, dict(c, dst=dst, tag=7, bytes=8))
        call(r, "X", "MPI_Waitall", t0[r] + 40, leave[r] - t0[r] - 40, {"count": 2})
        call(r, "i", "MPI_Recv_complete", leave[r], 0,
             {"src": src, "recv_tag": 7, "recv_bytes": 8, "comm": 0, "request": 1,
              "wait_start_ns": (BASE + t0[r] + 40) * 1000})
    enter = {0: 20 * ms, 1: 20 * ms, 2: leave[2] + 50, 3: leave[3] + 100}
    end = max(enter.values()) + 200
    for r in range(N):
        call(r, "X", "MPI_Allreduce", enter[r], end - enter[r],
             {"comm": 0, "comm_size": N, "comm_rank": r, "seq": 0, "bytes": 8})
    call(1, "X", "MPI_Isend", 150 * ms, 10, {"comm": 0, "comm_size": N, "comm_rank": 1, "dst": 0, "tag": 9,
                                             "bytes": 8})
    call(0, "X", "MPI_Irecv", 110 * ms, 10, {"comm": 0, "comm_size": N, "comm_rank": 0, "src": 1, "tag": 9,
                                             "request": 2})
    call(0, "X", "MPI_Test", 120 * ms, 30 * ms + 200, {"flag": 1})
    call(0, "i", "MPI_Recv_complete", 150 * ms + 200, 0,
         {"src": 1, "recv_tag": 9, "recv_bytes": 8, "comm": 0, "request": 2,
          "wait_start_ns": (BASE + 120 * ms) * 1000})
    return ev


def main():
    out = sys.argv[1]
    ev = chain()
    write(os.path.join(out, "chain.json"), [(700 + r, "rank %d: ./chain" % r, ev[r]) for r in range(N)])
    ev = rooted()
    write(os.path.join(out, "rooted.json"), [(600 + r, "rank %d: ./rooted" % r, ev[r]) for r in range(3)])
    ev = events()
    write(os.path.join(out, "merged.json"),
          [(500 + r, "rank %d: ./ring (pid %d)" % (r, 500 + r), ev[r]) for r in range(N)])
    for r in range(N):
        write(os.path.join(out, "rank%d.json" % r), [(500 + r, "./ring", ev[r])],
              {"backend": "mpi", "rank": r, "world_size": N})


main()
