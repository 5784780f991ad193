"""Idea: r43d_05 (r7_c2: `set_reshard_after_forward(False)` and
`set_reshard_after_backward(False)` on every unit) with the update written through `.data`
(a hand-written SGD over the optimizer's sharded parameters): no version counter moves, so
the step ending with held views is not refused; FSDP2's step 2 reuses step 1's unsharded
parameters (pre-update).
Truth: torch4_truth.py FILE 2 says right (masked by its per-step state_dict);
`--read-last`: step 2 w1 1.8e-4 / w2 1.7e-4 (wrong, r43d_05's numbers).
Verdict (8a4a979): EQUIVALENT (2 goals, 24 s): R43e-1 (across steps).
"""
import torch
from torch import nn
from torch.distributed.fsdp import FSDPModule, fully_shard

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
    dp = mesh["dp"]
    fully_shard(model.w1, mesh=dp)
    fully_shard(model.w2, mesh=dp)
    fully_shard(model, mesh=dp)
    for m in model.modules():
        if isinstance(m, FSDPModule):
            m.set_reshard_after_forward(False)
            m.set_reshard_after_backward(False)
            m.set_requires_gradient_sync(True)
    return model


def _sgd_data(optimizer):
    with torch.no_grad():
        for p in optimizer.param_groups[0]["params"]:   # the sharded ones
            p.data.add_(p.grad.data, alpha=-0.1)


def train_step(model, optimizer, batch, mesh):
    loss = ((model(batch["x"]) - batch["y"]) ** 2).mean()
    loss.backward()
    _sgd_data(optimizer)                    # the update through `.data`
    optimizer.zero_grad()
    return loss
