"""Issue 11 (tp 2, right): a column-parallel layer whose output features are all-gathered
(Megatron's gather-from-model-parallel region) over ``dist.new_group([0, 1])``: the tp axis's
ranks in the axis's order. Truth (tests/adversarial/tp_truth.py FILE): 0.0. UNKNOWN (129 s), not
for the group (tp): the c10d all-gather (``c10d._allgather_base_``) has no lowering rule, the
backward's ``chunk(n)[group rank]`` is "a rank-dependent block of a value that is no split",
and the deprecated ``all_gather_into_tensor`` warns (``c10d_logger`` state differs)."""

import torch
import torch.distributed as dist
from torch import nn
from torch.distributed.tensor import Shard, distribute_tensor

MESH = {"tp": 2}
SIZES = {"batch": 4, "hidden": 6, "ffn": 10}
_G = {}


class MLP(nn.Module):
    def __init__(self, h, f):
        super().__init__()
        self.w1 = nn.Linear(h, f, bias=False)

    def forward(self, x):
        return nn.functional.silu(self.w1(x))


def build_model(s):
    return MLP(s["hidden"], s["ffn"])


def make_batch(s):
    return {"x": torch.zeros(s["batch"], s["hidden"]), "y": torch.zeros(s["batch"], s["ffn"])}


def build_optimizer(model):
    return torch.optim.SGD(model.parameters(), lr=0.1)


class _GatherFromTP(torch.autograd.Function):
    """Megatron's gather-from-model-parallel region on the last dim: all-gather forward (the
    chunks in the group's rank order), the rank's own chunk backward."""

    @staticmethod
    def forward(ctx, x):
        g = _G["tp"]
        n = dist.get_world_size(group=g)
        xt = x.t().contiguous()
        out = xt.new_empty((n * xt.shape[0],) + tuple(xt.shape[1:]))
        dist.all_gather_into_tensor(out, xt, group=g)
        return out.t()

    @staticmethod
    def backward(ctx, grad):
        g = _G["tp"]
        n, r = dist.get_world_size(group=g), dist.get_rank(group=g)
        return grad.chunk(n, dim=-1)[r].contiguous()


def parallelize(model, mesh):
    model.w1.weight = nn.Parameter(distribute_tensor(model.w1.weight.detach(), mesh["tp"],
                                                     [Shard(0)]))
    _G["tp"] = dist.new_group([0, 1])
    return model


def train_step(model, optimizer, batch, mesh):
    x = batch["x"]
    if mesh is None:
        out = model(x)
    else:   # column-parallel w1, the output features gathered over tp
        out = _GatherFromTP.apply(nn.functional.silu(x @ model.w1.weight.to_local().t()))
    loss = ((out - batch["y"]) ** 2).mean()
    loss.backward()
    optimizer.step()
    optimizer.zero_grad()
    return loss
