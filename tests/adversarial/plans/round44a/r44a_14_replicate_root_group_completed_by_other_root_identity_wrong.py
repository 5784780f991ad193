"""Idea: a group [body[0], c] under fully_shard(body) (a root: the FSDP-based replicate root
over the model does not see fully_shard states). body's post-forward completes the group
(c not run), c's standalone forward reopens it and leaves body[0] pending: for real nothing
completes it (the replicate root's _force_complete_incomplete_states only visits replicate
states), so c's unsharded parameter stays registered until the backward. The stand-in's
Group.complete_all at ANY root's post-forward reshards it. An identity read of c.weight after
model(x): real "not the same" (x2).
Truth (torch4_truth.py FILE 2): wrong, step 1 body.0 0.0046 / c 0.0049 / head 0.011, step 2
0.0049 / 0.0048 / 0.014. Verdict (9d7244f): EQUIVALENT (8 goals, 49 s): R44a-1, false accept.
Control r44a_16 (no identity read): truth right 5.6e-17, EQUIVALENT (38-64 s).
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
        self.body = nn.Sequential(nn.Linear(h, f, bias=False), nn.SiLU())
        self.c = nn.Linear(f, f, bias=False)
        self.head = nn.Linear(f, h, bias=False)

    def forward(self, x):
        return self.head(nn.functional.silu(self.c(self.body(x))))


def build_model(s):
    return MLP(s["hidden"], s["ffn"])


def make_batch(s):
    g = torch.Generator().manual_seed(0)
    return {"x": torch.randn(s["batch"], s["hidden"], generator=g),
            "y": torch.randn(s["batch"], s["hidden"], generator=g)}


def build_optimizer(model):
    return torch.optim.SGD(model.parameters(), lr=0.1)


def parallelize(model, mesh):
    from torch.distributed.fsdp import fully_shard
    from torch.distributed._composable.replicate_with_fsdp import replicate
    fully_shard([model.body[0], model.c], mesh=mesh["dp"])   # one state; c outside body
    fully_shard(model.body, mesh=mesh["dp"])                 # its root (runs first)
    replicate(model, mesh=mesh["dp"])                        # FSDP-based: sees replicate only
    return model


def train_step(model, optimizer, batch, mesh):
    x, y = batch["x"], batch["y"]
    out = model(x)
    k = 1.0 if model.c.weight is optimizer.param_groups[0]["params"][3] else 2.0
    loss = ((out - y) ** 2).mean() * k
    loss.backward()
    optimizer.step()
    optimizer.zero_grad()
    return loss
