"""Idea (round 46c): r46c_04 on HSDP (dp_replicate 2 x dp_shard 2): clip_grad_norm_ inside a post-accumulate-grad hook (per parameter, on
FSDP2's sharded DTensor gradient: the norm needs the whole gradient), units w2 + root. Right
plan (a needless refusal / refutation check)."""
MESH = {"dp_replicate": 2, "dp_shard": 2}
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


def make_batch(s):
    g = torch.Generator().manual_seed(0)
    return {"x": torch.randn(s["batch"], s["hidden"], generator=g),
            "y": torch.randn(s["batch"], s["hidden"], generator=g)}


def build_model(s):
    return MLP(s["hidden"], s["ffn"])


def build_optimizer(model):
    return torch.optim.SGD(model.parameters(), lr=0.1)


def parallelize(model, mesh):
    from torch.distributed.fsdp import fully_shard
    fully_shard(model.w2, mesh=mesh["dp_replicate", "dp_shard"])
    fully_shard(model, mesh=mesh["dp_replicate", "dp_shard"])
    return model


def train_step(model, optimizer, batch, mesh):
    x, y = batch["x"], batch["y"]
    ps = [model.w1.weight, model.w2.weight]

    def hook(p):
        torch.nn.utils.clip_grad_norm_([p], 0.05)

    hs = [p.register_post_accumulate_grad_hook(hook) for p in ps]
    loss = ((model(x) - y) ** 2).mean()
    loss.backward()
    for h in hs:
        h.remove()
    for p in ps:
        p._post_accumulate_grad_hooks = None   # as before the step
    optimizer.step()
    optimizer.zero_grad()
    return loss
