"""Adversarial finding R24-1 (round 24, rebuilt in stop 33): a ``select`` index that differs
only at the real sizes. The loss is the mean square of column ``k`` of the output, ``k = 0`` in
the spec and at the probe sizes, ``k = 1`` on every rank at the real local batch 4. Wrong: the
gradients are those of another column. On main at 01859fe: exit 3 with an internal message
(``traced data: nodes: node 6: dim hidden_2 (size 6) does not divide over ['#0/14']``, the
select's chunk count is the probe size: see the closing note of stop 33); since the fix:
exit 3 naming the select and the line."""


import torch
import torch.distributed as dist
from torch import nn

MESH = {"dp": 2}
SIZES = {"batch": 8, "hidden": 6, "ffn": 6}


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
    k = 1 if mesh is not None and batch["x"].shape[0] == 4 else 0
    loss = (model(batch["x"])[:, k] ** 2).mean()
    loss.backward()
    if mesh is not None:
        for p in model.parameters():
            dist.all_reduce(p.grad, group=mesh["dp"].get_group())
            p.grad.div_(mesh["dp"].size())
    optimizer.step()
    optimizer.zero_grad()
    return loss
