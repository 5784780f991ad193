"""Round 35c (dp 2 x tp 2, right): r35c_01's control: the custom "borrow" backend's creator
returns the mesh's *dp* group's backend object, so the new group of the dp ranks runs over the
dp ranks, as the trace says.
Truth (tp_truth): w1 0.0, w2 2.8e-17. Prove at 761d5b3: EQUIVALENT (4 goals, 58 s): right."""

import torch
import torch.distributed as dist
from torch import nn

MESH = {"dp": 2, "tp": 2}
SIZES = {"batch": 8, "hidden": 6, "ffn": 10}
_G = {}
_BORROW = {}


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


def _creator(store, rank, size, timeout):
    return _BORROW["backend"]


def parallelize(model, mesh):
    if not hasattr(dist.Backend, "BORROW"):
        dist.Backend.register_backend("borrow", _creator, devices=["cpu"])
    _BORROW["backend"] = mesh["dp"].get_group()._get_backend(torch.device("cpu"))
    rank, dp, tp = dist.get_rank(), MESH["dp"], MESH["tp"]
    groups = [dist.new_group([i * tp + j for i in range(dp)], backend="borrow")
              for j in range(tp)]
    _G["dp"] = groups[rank % tp]
    return model


def train_step(model, optimizer, batch, mesh):
    loss = ((model(batch["x"]) - batch["y"]) ** 2).mean()
    loss.backward()
    if mesh is not None:
        g = _G["dp"]
        for p in model.parameters():
            dist.all_reduce(p.grad, group=g)
            p.grad.div_(dist.get_world_size(group=g))
    optimizer.step()
    optimizer.zero_grad()
    return loss
