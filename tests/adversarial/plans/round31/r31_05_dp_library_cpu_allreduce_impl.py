"""Round 31, R31-2 (dp 2): nothing of the train file runs while the step is
traced. At import the train file registers its own CPU kernel of c10d::allreduce_
(torch.library.Library("c10d", "IMPL")): it hands back the tensors as given and an
already-completed Work, reducing nothing. dist.all_reduce runs as torch ships it; the capture
traces on meta / fake tensors, where the Meta kernel (torch/distributed/_meta_registrations.py)
runs, never this one; the real gloo (CPU) run never reduces: each rank steps with its own
half-batch gradient, divided by 2. Wrong: truth (torch4_truth.py FILE 2) update w1 0.0067,
w2 0.010; step 2 0.0090 / 0.013. EQUIVALENT at 0f22574 (4 goals, 29 s)."""

import torch
import torch._C._distributed_c10d as c10d
import torch.distributed as dist
from torch import nn

MESH = {"dp": 2}
SIZES = {"batch": 8, "hidden": 6, "ffn": 10}

_LIB = torch.library.Library("c10d", "IMPL")


def _allreduce_cpu(tensors, process_group, reduce_op, sparse_indices, async_op=True,
                   timeout=-1):
    f = torch.futures.Future()
    f.set_result(list(tensors))
    return tensors, c10d._create_work_from_future(f).boxed()


_LIB.impl("allreduce_", _allreduce_cpu, "CPU")


class MLP(nn.Module):
    def __init__(self, h, f):
        super().__init__()
        self.w1 = nn.Linear(h, f, bias=False)
        self.w2 = nn.Linear(f, h, bias=False)

    def forward(self, x):
        return self.w2(nn.functional.silu(self.w1(x)))


def build_model(s):
    return MLP(s["hidden"], s["ffn"])


def make_batch(s):
    return {"x": torch.zeros(s["batch"], s["hidden"]), "y": torch.zeros(s["batch"], s["hidden"])}


def build_optimizer(model):
    return torch.optim.SGD(model.parameters(), lr=0.1)


def parallelize(model, mesh):
    return model


def train_step(model, optimizer, batch, mesh):
    loss = ((model(batch["x"]) - batch["y"]) ** 2).mean()
    loss.backward()
    if mesh is not None:
        pg = mesh["dp"].get_group()
        for p in model.parameters():
            dist.all_reduce(p.grad, group=pg)
        for p in model.parameters():
            p.grad.div_(mesh["dp"].size())
    optimizer.step()
    optimizer.zero_grad()
    return loss
