"""A small PyTorch training loop (Conv2d, Linear, SGD, a record_function
region per step) that knows nothing of loom.

  torch_model.py          runs it
  torch_model.py profile  runs it under PyTorch's own profiler and prints
                          "profiler ops N user M": the events inside the
                          "workload" region in PyTorch's event tree, ops
                          and user ranges (record_function and optimizer
                          USER_SCOPE); then
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
    # PyTorch's own event tree, nested by its ns times.  (Its function_events
    # are rebuilt from whole microseconds: now and then they lose a zero-length
    # op such as aten::resolve_conj, and cpu_parent puts a short op's child
    # under its grandparent.)
    stack = list(prof.kineto_results.experimental_event_tree())
    root = None
    while stack and root is None:
        n = stack.pop()
        if n.name == "workload":
            root = n
        stack.extend(n.children)
    pairs, depth, user, ops = {}, 0, 0, 0
    stack = [(c, 1) for c in root.children]
    while stack:
        n, d = stack.pop()
        key = (n.parent.name, n.name)
        pairs[key] = pairs.get(key, 0) + 1
        depth = max(depth, d)
        if n.name == "train_step" or n.name.startswith("Optimizer."):
            user += 1
        else:
            ops += 1
        stack.extend((c, d + 1) for c in n.children)
    print("profiler ops %d user %d" % (ops, user))
    print("profiler nesting %s" % ";".join("%s>%s=%d" % (k[0], k[1], n) for k, n in sorted(pairs.items())))
    print("profiler depth %d" % depth)
else:
    work()
    print("done")
