"""Idea: parallelize marks the (sharded) w1.weight with a Python attribute (no_decay = True) that
build_optimizer reads to choose its weight decay; the spec's parameters carry no mark. The
tracer gives build_optimizer fresh Parameters (no attribute) on both sides.
Truth: wrong, step 1 w1 0.020, step 2 w2 0.018. Verdict (ac24550): EQUIVALENT (10 goals,
28 s): R44b-3, false accept.
"""
MESH = {"dp": 2}
import torch
from torch import nn

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
    g = torch.Generator().manual_seed(0)
    return {"x": torch.randn(s["batch"], s["hidden"], generator=g),
            "y": torch.randn(s["batch"], s["hidden"], generator=g)}


def build_optimizer(model):
    decay = [p for p in model.parameters() if not getattr(p, "no_decay", False)]
    rest = [p for p in model.parameters() if getattr(p, "no_decay", False)]
    return torch.optim.AdamW([{"params": decay, "weight_decay": 0.5},
                              {"params": rest, "weight_decay": 0.0}], lr=0.1)


def parallelize(model, mesh):
    from torch.distributed.fsdp import fully_shard
    fully_shard(model, mesh=mesh["dp"])
    model.w1.weight.no_decay = True
    return model


def train_step(model, optimizer, batch, mesh):
    x, y = batch["x"], batch["y"]
    loss = ((model(x) - y) ** 2).mean()
    loss.backward()
    optimizer.step()
    optimizer.zero_grad()
    return loss
