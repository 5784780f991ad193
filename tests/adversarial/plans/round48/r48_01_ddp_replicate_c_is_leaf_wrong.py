"""Idea (stop 48, lead): r47d_07 reading is_leaf through torch._C.TensorBase's own getset descriptor (bypasses the torch.Tensor property guard) under the DDP-based replicate: the parameter itself for real (a leaf), the stand-in's AllReduceGrad view is not: doubling (parallel only) when it was a leaf: wrong for real."""
MESH = {"dp": 2}
import copy
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


SEEN = []


def _build(s):
    m = MLP(s["hidden"], s["ffn"])
    m.w2.register_forward_hook(lambda mod, i, o: SEEN.append(not torch._C.TensorBase.__dict__["is_leaf"].__get__(mod.weight)))
    return m


def make_batch(s):
    g = torch.Generator().manual_seed(0)
    return {"x": torch.randn(s["batch"], s["hidden"], generator=g),
            "y": torch.randn(s["batch"], s["hidden"], generator=g)}


def build_model(s):
    return _build(s)


def build_optimizer(model):
    return torch.optim.SGD(model.parameters(), lr=0.1)


def parallelize(model, mesh):
    from torch.distributed._composable.replicate import replicate
    replicate(model, device_mesh=mesh["dp"])
    return model


def train_step(model, optimizer, batch, mesh):
    x, y = batch["x"], batch["y"]
    loss = ((model(x) - y) ** 2).mean()
    loss.backward()
    seen = list(SEEN)
    SEEN.clear()
    if mesh is not None and seen and not seen[0]:
        with torch.no_grad():
            for p in model.parameters():
                p.grad.mul_(2.0)
    optimizer.step()
    optimizer.zero_grad()
    return loss
