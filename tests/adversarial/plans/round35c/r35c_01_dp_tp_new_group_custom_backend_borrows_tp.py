"""Round 35c (dp 2 x tp 2): hand-written DDP over a ``dist.new_group`` of the rank's dp ranks
(Megatron's loop: every rank makes every group, in the same order) whose backend is a custom
one the train file registers (``dist.Backend.register_backend("borrow", creator)``): the
creator returns the *tp* group's existing backend object, so the new group object (ranks = the
dp axis's, as torch made it, name a counter, backends unchanged since it was made) runs its
collectives over tp's ranks. Nothing in ``distributed_c10d`` is replaced (``Backend._plugins``
is a class attribute).
Truth (tests/adversarial/tp_truth.py FILE): w1 0.0088, w2 0.018 on every rank. Prove at 761d5b3:
**EQUIVALENT** (4 goals, 64 s): finding R35c-1, a false accept."""

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
    _BORROW["backend"] = mesh["tp"].get_group()._get_backend(torch.device("cpu"))
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
