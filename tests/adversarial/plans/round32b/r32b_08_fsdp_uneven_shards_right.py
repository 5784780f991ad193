"""Round 32b attempt (dp 2, FSDP2, right): t4_19 with hidden 3, ffn 5, so fully_shard's shards are
uneven at the real sizes (w1 5 rows: 3 / 2 + padding): would check_real_ranks see rank 1's
shorter shard as another program at the real sizes (a false refusal)? No: refused earlier and
on purpose, exit 3 (14 s at 86fb1ce) "fully_shard shards w1.weight dim 0 (local size 5) over
'dp' (size 2), which does not divide it (FSDP2 pads; uneven shards are not modelled)".
Truth (torch4_truth.py FILE 2): 0.0 / 2.8e-17."""

import torch
from torch import nn
from torch.distributed.fsdp import fully_shard

MESH = {"dp": 2}
SIZES = {"batch": 8, "hidden": 3, "ffn": 5}


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
    return model


def train_step(model, optimizer, batch, mesh):
    loss = ((model(batch["x"]) - batch["y"]) ** 2).mean()
    loss.backward()
    optimizer.step()
    optimizer.zero_grad()
    return loss
