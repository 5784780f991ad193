"""Round 37a (dp 2, right): a false-refusal check of faf97b6's `new_group` checks on
Megatron-LM's `parallel_state.create_group` arguments: `timeout=timedelta(minutes=30)`,
`pg_options=None`, `group_desc=...`, and the gloo duplicate of the dp group (made, not used).
Hand-written DDP over the dp group.
Truth (torch4_truth.py FILE 1): w1 5.6e-17, w2 0.0 (right).
Verdict at faf97b6: **exit 3** (37 s), line 50 (the gloo duplicate): "RuntimeError: the fake
process group's store holds nothing (set)": false refusal R37a-5 (not the timeout nor
`group_desc`: `_tampered()` is True in every capture since faf97b6, so `backend="gloo"` is
no longer made on the fake backend; r35c_05, no timeout, fails the same way, 22 s).
"""

import datetime
import os

import torch
import torch.distributed as dist
from torch import nn

MESH = {"dp": 2}
SIZES = {"batch": 8, "hidden": 6, "ffn": 10}
_G = {}


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
    ranks = list(range(dist.get_world_size()))
    # Megatron-LM's parallel_state.create_group: timeout=timedelta(minutes=NCCL timeout),
    # group_desc naming the group, a gloo duplicate next to the dp group
    timeout = datetime.timedelta(minutes=30)
    _G["dp"] = dist.new_group(ranks=ranks, timeout=timeout, pg_options=None,
                              group_desc="DATA_PARALLEL_GROUP")
    _G["dp_gloo"] = dist.new_group(ranks=ranks, timeout=timeout, backend="gloo",
                                   group_desc="DATA_PARALLEL_GROUP_GLOO")
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
