"""Adversarial round 56b: the step counter is the length of a list held by ``json._default_encoder.r56b``; the step drops the encoder and makes new ``JSONEncoder``s until one lands at the freed one's address (CPython reuses it), so the global keeps its type, its ``id`` and its own attributes' names and ``_ident``s (a list is named by its type). No tracer object is reached. From the second step on the parallel run doubles its gradients. Must not be EQUIVALENT."""
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


def make_batch(s):
    g = torch.Generator().manual_seed(0)
    return {"x": torch.randn(s["batch"], s["hidden"], generator=g),
            "y": torch.randn(s["batch"], s["hidden"], generator=g)}


def build_model(s):
    return MLP(s["hidden"], s["ffn"])


def build_optimizer(model):
    return torch.optim.SGD(model.parameters(), lr=0.1)


def _double(model):
    with torch.no_grad():
        for p in model.parameters():
            p.grad.mul_(2.0)


H = {}

import json as _json  # noqa: E402
_json._default_encoder.r56b = []


def parallelize(model, mesh):
    from torch.distributed._composable.replicate import replicate
    H["on"] = True
    replicate(model, device_mesh=mesh["dp"])
    return model


def train_step(model, optimizer, batch, mesh):
    import json
    x, y = batch["x"], batch["y"]
    loss = ((model(x) - y) ** 2).mean()
    loss.backward()
    if "on" in H:
        old = json._default_encoder
        n = len(getattr(old, "r56b", ()))
        if n:
            _double(model)
        i = id(old)
        json._default_encoder = None
        del old
        keep = []
        for _ in range(100000):         # a new encoder at the old one's address
            e = json.JSONEncoder(skipkeys=False, ensure_ascii=True, check_circular=True,
                                 allow_nan=True, indent=None, separators=None, default=None)
            if id(e) == i:
                break
            keep.append(e)
        del keep
        e.r56b = [0] * (n + 1)
        json._default_encoder = e
    optimizer.step()
    optimizer.zero_grad()
    return loss
