"""A PyTorch loop that numbers its steps as torch.profiler does: each step
is a record_function("ProfilerStep#N") range (what torch.profiler.profile's
step() opens) holding a "train_step" range with one matmul.  It knows
nothing of loom.

  torch_steps.py [STEPS]   (default 20)
"""
import sys

import torch

torch.set_num_threads(1)
a = torch.randn(16, 16)
b = torch.randn(16, 16)
steps = int(sys.argv[1]) if len(sys.argv) > 1 else 20
for i in range(steps):
    with torch.autograd.profiler.record_function("ProfilerStep#%d" % i):
        with torch.autograd.profiler.record_function("train_step"):
            c = torch.mm(a, b)
print("done", float(c.sum()) == float(c.sum()))
