"""Round 39b, false-accept probe (dp 2, wrong). A gradient-doubling post-accumulate-grad hook
is registered on ``w1.weight`` in the parallel step and removed *before* the backward on rank 0
(the rank the fake process group traces) and after it on every other rank: rank 1's gradient of
``w1.weight`` is doubled before the all-reduce (a mean of g0 and 2 g1). The removal leaves
the same empty dict on every rank.
Truth (2 steps): step 1 w1 0.0067 / w2 0.0, step 2 w1 0.0073 / w2 8.6e-05 (wrong).
Verdict at a90b464: exit 3 (72 s), "the graph at rank {'dp': 1} has 65 nodes, the main trace
64: the program's ops depend on the sizes or the rank" (sound)."""


import torch
import torch.distributed as dist
from torch import nn

MESH = {"dp": 2}
SIZES = {"batch": 8, "hidden": 6, "ffn": 10}


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


def _double(p):
    p.grad.mul_(2.0)


def train_step(model, optimizer, batch, mesh):
    h = None
    if mesh is not None:
        h = model.w1.weight.register_post_accumulate_grad_hook(_double)
        if dist.get_rank(mesh["dp"].get_group()) == 0:
            h.remove()
    loss = ((model(batch["x"]) - batch["y"]) ** 2).mean()
    loss.backward()
    if h is not None:
        h.remove()
        for p in model.parameters():
            dist.all_reduce(p.grad, group=mesh["dp"].get_group())
            p.grad.div_(mesh["dp"].size())
    optimizer.step()
    optimizer.zero_grad()
    return loss
