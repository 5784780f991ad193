"""R20 control of ``r20_02_tp_set_order.py``: the same plan with the tp all-reduces in list
order (no hash-seed dependence). UNKNOWN: the per-rank process-group constants of a 2-d mesh
are not lowered, so ``r20_02`` cannot reach a verdict either."""

import torch
import torch.distributed as dist
from torch import nn

MESH = {"dp": 2, "tp": 2}
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
        for name in ["w1.weight", "w2.weight"]:       # control: a list
            g = params[name].grad
            dist.all_reduce(g, group=mesh["tp"].get_group())
            g.div_(mesh["tp"].size())
        for p in model.parameters():
            dist.all_reduce(p.grad, group=mesh["dp"].get_group())
            p.grad.div_(mesh["dp"].size())
    optimizer.step()
    optimizer.zero_grad()
    return loss
