"""Idea (round 46c): r46c_10 with zero_grad() (set_to_none): gradient accumulation (two backwards in one step) with
zero_grad(set_to_none=False): the .grad object kept across the backwards and the step (FSDP2
adds into its local tensor in place); a hook on w1.weight (root unit, final callback) reads
w2.weight.grad (unit w2: set at its post-backward, before) and the .grad identity; the .grad
kept from before the backward must still be the parameter's. Units w2 + root. Right plan."""
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
    fully_shard(model.w2, mesh=mesh["dp"])
    fully_shard(model, mesh=mesh["dp"])
    return model


def train_step(model, optimizer, batch, mesh):
    x, y = batch["x"], batch["y"]
    before = [p.grad for p in (model.w1.weight, model.w2.weight)]
    seen = []

    def hook(p):
        seen.append(model.w2.weight.grad is not None)

    h = model.w1.weight.register_post_accumulate_grad_hook(hook)
    for k in range(2):
        loss = ((model(x * (k + 1)) - y) ** 2).mean() / 2
        loss.backward()
    h.remove()
    model.w1.weight._post_accumulate_grad_hooks = None   # as before the step
    for g, p in zip(before, (model.w1.weight, model.w2.weight)):
        if g is not None and g is not p.grad:
            p.grad.mul_(2.0)
    if seen != [True, True]:
        model.w1.weight.grad.mul_(3.0)
    optimizer.step()
    optimizer.zero_grad()
    return loss
