"""A small PyTorch training loop (Conv2d, Linear, SGD, a record_function
region per step) that knows nothing of loom.

  torch_model.py          runs it
  torch_model.py profile  runs it under PyTorch's own profiler and prints
                          "profiler ops N user M": the events that start
                          inside the "workload" region, ops and user ranges
                          (record_function and optimizer USER_SCOPE); then
                          their nesting in the profiler's event tree:
                          "profiler nesting P>C=N;..." (N events named C
                          whose parent is named P, "-" for none; sorted by
                          P, then C) and "profiler depth D" (the deepest
                          event's depth below "workload", its children 1).
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
    # PyTorch's own event tree (nested by its ns times; the function_events'
    # cpu_parent is rebuilt from whole microseconds and now and then puts a
    # short op's child under its grandparent).
    pairs, depth = {}, 0
    stack = [(n, 0) for n in prof.kineto_results.experimental_event_tree()]
    root = None
    while stack and root is None:
        n, _ = stack.pop()
        if n.name == "workload":
            root = n
        stack.extend((c, 0) for c in n.children)
    stack = [(c, 1) for c in root.children]
    while stack:
        n, d = stack.pop()
        key = (n.parent.name, n.name)
        pairs[key] = pairs.get(key, 0) + 1
        depth = max(depth, d)
        stack.extend((c, d + 1) for c in n.children)
    print("profiler nesting %s" % ";".join("%s>%s=%d" % (k[0], k[1], n) for k, n in sorted(pairs.items())))
    print("profiler depth %d" % depth)
else:
    work()
    print("done")
