"""Idea (round 49b): FSDP-based replicate on w2 and root; kept w2 reference's size between forward and backward: replicate never reshards after forward (allocated, size != 0). Doubling (parallel only) when allocated: wrong; false accept if the stand-in frees it after forward."""
MESH = {"dp": 2}
import torch
from torch import nn

SIZES = {"batch": 8, "hidden": 6, "ffn": 10}


class MLP(nn.Module):
    def __init__(self, h, f):
        super().__init__()
        self.w0 = nn.Linear(h, h, bias=False)
        self.w1 = nn.Linear(h, f, bias=False)
        self.w2 = nn.Linear(f, h, bias=False)

    def forward(self, x):
        return self.w2(nn.functional.silu(self.w1(torch.tanh(self.w0(x)))))


def make_batch(s):
    g = torch.Generator().manual_seed(0)
    return {"x": torch.randn(s["batch"], s["hidden"], generator=g),
            "y": torch.randn(s["batch"], s["hidden"], generator=g)}


def build_optimizer(model):
    return torch.optim.SGD(model.parameters(), lr=0.1)

SEEN = []


def double(model):
    with torch.no_grad():
        for p in model.parameters():
            if p.grad is not None:
                p.grad.mul_(2.0)


def parallelize(model, mesh):
    from torch.distributed._composable.replicate_with_fsdp import replicate
    replicate(model.w2, mesh=mesh["dp"])
    replicate(model, mesh=mesh["dp"])
    return model


def build_model(s):
    m = MLP(s["hidden"], s["ffn"])
    m.w2.register_forward_hook(lambda mod, a, o: SEEN.append(mod.weight))
    return m


def train_step(model, optimizer, batch, mesh):
    x, y = batch["x"], batch["y"]
    loss = ((model(x) - y) ** 2).mean()
    live = SEEN[-1].untyped_storage().size() != 0
    SEEN.clear()
    loss.backward()
    if mesh is not None and live:
        double(model)
    optimizer.step()
    optimizer.zero_grad()
    return loss
