"""R20-2 on a one-axis mesh: a DDP (dp = 4) that all-reduces its two same-shaped gradients in
the iteration order of a set of their names (the string-hash seed's order).

Truth: the ranks of a real run are separate interpreters with separate hash seeds; two ranks
that walk the set in different orders sum one's w1.grad with the other's w2.grad: wrong
gradients (about 7 runs in 8 have some pair of the 4 ranks disagree). The verifier refuses it
(the traces differ) only when two traced ranks disagree: before round 20 each of the 5 plan
traces had its own seed (accepted ~1 in 16); with two fork servers, jobs 2, 4, 6 share one seed
and 3, 5 the other (accepted ~1 in 2).
"""

import torch
import torch.distributed as dist
from torch import nn

MESH = {"dp": 4}
SIZES = {"batch": 8, "hidden": 6}


class MLP(nn.Module):
    def __init__(self, h):
        super().__init__()
        self.w1 = nn.Linear(h, h, bias=False)
        self.w2 = nn.Linear(h, h, bias=False)

    def forward(self, x):
        return self.w2(nn.functional.silu(self.w1(x)))


def build_model(s):
    return MLP(s["hidden"])


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
        params = dict(model.named_parameters())
        for name in {"w1.weight", "w2.weight"}:       # a set: the order is the hash seed's
            g = params[name].grad
            dist.all_reduce(g, group=mesh["dp"].get_group())
            g.div_(mesh["dp"].size())
    optimizer.step()
    optimizer.zero_grad()
    return loss
