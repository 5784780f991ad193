"""Round 39b, false-refusal probe (dp 2, right). The old DDP style: a tensor hook
(``Tensor.register_hook``) on each parameter all-reduces and averages the gradient it is
given; registered in train_step and removed after the backward (``_backward_hooks`` left as an
empty dict, read as None since d3f231b).
Truth (2 steps): 5.6e-17 / 0.0, 5.6e-17 / 5.6e-17 (right).
Verdict at a90b464: EQUIVALENT (4 goals, 71 s): right."""


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


def train_step(model, optimizer, batch, mesh):
    handles = []
    if mesh is not None:
        pg = mesh["dp"].get_group()

        def reduce(g):
            g = g.clone()
            dist.all_reduce(g, group=pg)
            return g / mesh["dp"].size()

        handles = [p.register_hook(reduce) for p in model.parameters()]
    loss = ((model(batch["x"]) - batch["y"]) ** 2).mean()
    loss.backward()
    for h in handles:
        h.remove()
    optimizer.step()
    optimizer.zero_grad()
    return loss
