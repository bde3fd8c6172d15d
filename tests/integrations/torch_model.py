"""A small PyTorch training loop (Conv2d, Linear, SGD, a record_function
region per step) that knows nothing of loom.

  torch_model.py          runs it
  torch_model.py profile  runs it under PyTorch's own profiler and prints
                          "profiler ops N user M": the events that start
                          inside the "workload" region, ops and user ranges
                          (record_function and optimizer USER_SCOPE).
The whole run sits in a record_function("workload") region, so a trace of
the whole process can be compared with the profiler's window.
"""
import sys

import torch
from torch import nn

torch.manual_seed(0)
torch.set_num_threads(1)
model = nn.Sequential(nn.Conv2d(3, 8, 3), nn.ReLU(), nn.Flatten(), nn.Linear(8 * 14 * 14, 10))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
x = torch.randn(4, 3, 16, 16)
y = torch.randint(0, 10, (4,))


def work():
    with torch.autograd.profiler.record_function("workload"):
        for _ in range(3):
            with torch.autograd.profiler.record_function("train_step"):
                opt.zero_grad()
                loss = nn.functional.cross_entropy(model(x), y)
                loss.backward()
                opt.step()


if len(sys.argv) > 1 and sys.argv[1] == "profile":
    with torch.autograd.profiler.profile() as prof:
        work()
    w = next(e for e in prof.function_events if e.name == "workload")
    ev = [e for e in prof.function_events if e is not w and
          w.time_range.start <= e.time_range.start <= w.time_range.end]
    user = sum(1 for e in ev if e.name == "train_step" or e.name.startswith("Optimizer."))
    print("profiler ops %d user %d" % (len(ev) - user, user))
else:
    work()
    print("done")
