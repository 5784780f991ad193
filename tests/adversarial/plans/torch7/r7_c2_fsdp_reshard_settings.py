"""Round 7 control, wrong since round 43d (R43d-5): the FSDP2 MLP whose `parallelize` sets the
memory settings torchtitan sets for gradient accumulation (`set_reshard_after_forward(False)`,
`set_reshard_after_backward(False)`) and `set_requires_gradient_sync(True)`, left on for good:
FSDP2 never reshards, so the next step's forward reuses the unsharded parameters gathered
before this step's update (truth `torch4_truth.py FILE 2 --read-last`: w1 1.8e-4 at step 2;
without `--read-last` the truth's `state_dict` read reshards and hides it). Was EQUIVALENT;
since stop 43 refused, exit 3, naming the `fully_shard` line."""

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
