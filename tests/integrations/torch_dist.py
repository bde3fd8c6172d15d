"""torch.distributed collectives in a one-rank gloo world, for loom's
PyTorch adapter test: all_reduce of 16 floats, broadcast of 8 int64s,
all_gather of 4 floats on a second group, and a barrier (tests/test_pytorch.c
checks the Kineto collective arguments of each c10d op and the trace's
rank / world_size / backend)."""
import os
import sys
import tempfile

import torch
import torch.distributed as dist

store = os.path.join(tempfile.mkdtemp(), "store")
dist.init_process_group("gloo", rank=0, world_size=1, init_method="file://" + store)
t = torch.ones(16)
dist.all_reduce(t)
dist.broadcast(torch.arange(8), 0)
g = dist.new_group([0])
out = [torch.zeros(4)]
dist.all_gather(out, torch.ones(4), group=g)
dist.barrier()
dist.destroy_process_group()
print("sum", float(t.sum()), file=sys.stderr)
