"""Idea: r7_c2 (`set_reshard_after_forward(False)` and `set_reshard_after_backward(False)` on
every unit, "torchtitan's memory settings"), copied. FSDP2 then never reshards inside the step,
and nothing before the next forward does either (`unshard` a no-op on an unsharded group):
step 2 runs on step 1's pre-update unsharded parameters. FSDP2 documents the user must
`reshard()` (or set True again) before the optimizer step; torchtitan sets
`set_reshard_after_backward(False)` only for the micro-batches before the last. The one-step
proof cannot see step 2, and `release_all` drops the held views at the end of `train_step`.
Truth: torch4_truth.py FILE 2 says right (its per-step `state_dict()` read reshards through
FSDP2's state-dict pre-hook); read once after step 2 (no per-step read): step 2 w1 1.8e-4 /
w2 1.7e-4 (wrong). So r7_c2's "right" truth is the harness's.
Verdict (f7d58ae): EQUIVALENT (4 goals, 58 s; 35 s at s421): R43d-5 (R43d-4's family).
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


def train_step(model, optimizer, batch, mesh):
    loss = ((model(batch["x"]) - batch["y"]) ** 2).mean()
    loss.backward()
    optimizer.step()
    optimizer.zero_grad()
    return loss
