"""A small PyTorch training loop under torch.profiler(profile_memory=True),
knowing nothing of loom; prints what PyTorch's profiler saw of memory inside
its "workload" record_function region, for a test to compare with loom's
trace of the same run:

  profiler memory N1=B1;N2=B2;...   per op name, the bytes allocated minus
                                    freed by its ops themselves (not their
                                    children), as PyTorch's event tree
                                    places each allocation under the op that
                                    made it (ops only, not record_function
                                    ranges; sums of 0 left out; sorted)
  profiler self N1=B1;...           the same from self_cpu_memory_usage
                                    (FunctionEvent), which PyTorch finds by
                                    whole-microsecond intervals: allocations
                                    at an op's edge may count for its
                                    neighbour, so it moves from run to run
  profiler net B                    self_cpu_memory_usage summed over every
                                    event inside the region (ranges too)
  profiler allocs A frees F bytes B allocations and frees PyTorch's event
                                    tree holds inside the region, and the
                                    bytes allocated
"""
import torch
from torch import nn
from torch.profiler import ProfilerActivity, profile, record_function

torch.manual_seed(0)
torch.set_num_threads(1)
model = nn.Sequential(nn.Conv2d(3, 8, 3), nn.ReLU(), nn.Flatten(), nn.Linear(8 * 14 * 14, 10))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
x = torch.randn(4, 3, 16, 16)
y = torch.randint(0, 10, (4,))
USER = ("workload", "train_step")

with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
    with record_function("workload"):
        for _ in range(3):
            with record_function("train_step"):
                opt.zero_grad()
                loss = nn.functional.cross_entropy(model(x), y)
                loss.backward()
                opt.step()



def is_op(name):
    return not (name in USER or name.startswith("Optimizer.") or name == "[memory]")


def joined(per):
    return ";".join("%s=%d" % (k, v) for k, v in sorted(per.items()) if v)


w = next(e for e in prof.events() if e.name == "workload")
per, net = {}, w.self_cpu_memory_usage
for e in prof.events():
    if e is w or not w.time_range.start <= e.time_range.start <= w.time_range.end:
        continue
    net += e.self_cpu_memory_usage
    if is_op(e.name):
        per[e.name] = per.get(e.name, 0) + e.self_cpu_memory_usage

root, stack = None, list(prof.profiler.kineto_results.experimental_event_tree())
while stack and root is None:
    n = stack.pop()
    if n.name == "workload":
        root = n
    stack.extend(n.children)
allocs = frees = nbytes = 0
tree = {}
stack = list(root.children)
while stack:
    n = stack.pop()
    f = n.extra_fields
    if type(f).__name__ == "_ExtraFields_Allocation":
        if f.alloc_size > 0:
            allocs, nbytes = allocs + 1, nbytes + f.alloc_size
        else:
            frees += 1
        if n.parent is not None and is_op(n.parent.name):
            tree[n.parent.name] = tree.get(n.parent.name, 0) + f.alloc_size
    stack.extend(n.children)
print("profiler memory %s" % joined(tree))
print("profiler self %s" % joined(per))
print("profiler net %d" % net)
print("profiler allocs %d frees %d bytes %d" % (allocs, frees, nbytes))
