"""DistributedDataParallel on 2 gloo ranks, knowing nothing of loom.

  ddp.py spawn OUTDIR     starts both ranks with torch.multiprocessing.spawn
  ddp.py worker OUTDIR    one rank started by torchrun (RANK, WORLD_SIZE,
                          MASTER_ADDR, MASTER_PORT from the environment)

Each rank trains a small Linear model for 3 steps inside a
record_function("workload") region under PyTorch's own profiler, and writes
OUTDIR/rank<R>.txt: "rank R pid P profiler ops N" (the ops below "workload"
in the profiler's event tree, user ranges excluded) and then "NAME COUNT"
per op name, so a trace of every process can be
compared rank by rank with the profiler's count.
"""
import os
import sys

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch import nn


def train(rank, world, outdir):
    torch.manual_seed(0)
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=world)
    model = nn.parallel.DistributedDataParallel(nn.Sequential(nn.Linear(32, 16), nn.ReLU(), nn.Linear(16, 4)))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x, y = torch.randn(8, 32), torch.randn(8, 4)
    with torch.autograd.profiler.profile() as prof:
        with torch.autograd.profiler.record_function("workload"):
            for _ in range(3):
                with torch.autograd.profiler.record_function("train_step"):
                    opt.zero_grad()
                    nn.functional.mse_loss(model(x), y).backward()
                    opt.step()
    # PyTorch's own event tree (its function_events list loses some of the
    # reducer's ops): every event below "workload", user ranges apart.
    stack = list(prof.kineto_results.experimental_event_tree())
    root = None
    while stack and root is None:
        n = stack.pop()
        if n.name == "workload":
            root = n
        stack.extend(n.children)
    names, stack = {}, list(root.children)
    while stack:
        n = stack.pop()
        names[n.name] = names.get(n.name, 0) + 1
        stack.extend(n.children)
    user = ("train_step", "Optimizer.", "gloo:", "DistributedDataParallel.")
    ops = {k: v for k, v in names.items() if not k.startswith(user)}
    with open(os.path.join(outdir, "rank%d.txt" % rank), "w") as f:
        f.write("rank %d pid %d profiler ops %d\n" % (rank, os.getpid(), sum(ops.values())))
        for k in sorted(ops):
            f.write("%s %d\n" % (k, ops[k]))
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    mode, outdir = sys.argv[1], sys.argv[2]
    if mode == "spawn":
        os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
        os.environ.setdefault("MASTER_PORT", str(29400 + os.getpid() % 500))
        mp.spawn(train, args=(2, outdir), nprocs=2)
    else:
        train(int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"]), outdir)
    print("ddp done")
