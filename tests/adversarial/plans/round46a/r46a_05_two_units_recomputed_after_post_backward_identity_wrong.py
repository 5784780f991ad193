"""Idea (round 46a, the late-binding fix of unshard_only): two units w1 and w2 (square), each
used only detached inside a non-reentrant checkpoint and then on its output (w2(w1(a))). In the
backward each unit's post-backward reshards it, then the checkpoint recomputes the region: torch
2.13 sees both states in PRE_BACKWARD, unshards each and returns, so both stay unsharded after
the backward. The optimizer holds w0 only (no stale-update refusal); after the backward w0's
gradient is scaled by 1 + [w1 not p1] + 2 [w2 not p2] (p1, p2: the registered parameters at the
step's start). Single device: 1; torch FSDP2: 4 in step 1.
"""
MESH = {"dp": 2}
import torch
from torch import nn

SIZES = {"batch": 8, "hidden": 6}


class M(nn.Module):
    def __init__(self, h):
        super().__init__()
        self.w0 = nn.Linear(h, h, bias=False)
        self.w1 = nn.Linear(h, h, bias=False)
        self.w2 = nn.Linear(h, h, bias=False)

    def region(self, h0, x):
        return nn.functional.silu(h0) * self.w1(x).detach() * self.w2(x).detach()

    def forward(self, x):
        from torch.utils.checkpoint import checkpoint
        h0 = self.w0(x)
        a = checkpoint(self.region, h0, x, use_reentrant=False)
        return self.w2(self.w1(a))


def make_batch(s):
    g = torch.Generator().manual_seed(0)
    return {"x": torch.randn(s["batch"], s["hidden"], generator=g),
            "y": torch.randn(s["batch"], s["hidden"], generator=g)}


def build_model(s):
    return M(s["hidden"])


def build_optimizer(model):
    return torch.optim.SGD([model.w0.weight], lr=0.1)


def parallelize(model, mesh):
    from torch.distributed.fsdp import fully_shard
    fully_shard(model.w1, mesh=mesh["dp"])
    fully_shard(model.w2, mesh=mesh["dp"])
    fully_shard(model, mesh=mesh["dp"])
    return model


def train_step(model, optimizer, batch, mesh):
    x, y = batch["x"], batch["y"]
    p0 = optimizer.param_groups[0]["params"][0]
    p1, p2 = model.w1.weight, model.w2.weight
    loss = ((model(x) - y) ** 2).mean()
    loss.backward()
    s = (model.w1.weight is not p1) + 2 * (model.w2.weight is not p2)
    p0.grad.mul_(1.0 + s)
    optimizer.step()
    optimizer.zero_grad()
    return loss
