"""Adversarial round 56e: the step counter is the text of a ``str`` subclass key in ``json``'s namespace, ``_F(f"c{n}")`` (value: the submodule ``json.decoder``), whose own ``__format__`` returns ``"decoder"``: the submodule test ``sys.modules.get(f"{name}.{k}") is v`` calls that ``__format__`` (user code in the fingerprint) and skips the entry. ``process_state._process_state`` skips an entry whose value is ``sys.modules[f"{name}.{k}"]`` (a submodule, set by its import) before it reads the key, so the key's text (``key_text``: its identity and own attributes) is never taken. From the second step on the parallel run doubles its gradients. Must not be EQUIVALENT."""
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


def parallelize(model, mesh):
    from torch.distributed._composable.replicate import replicate
    H["on"] = True
    replicate(model, device_mesh=mesh["dp"])
    return model


def _key():
    import json
    import sys
    return next(k for k in vars(json) if type(k) is _F)


def train_step(model, optimizer, batch, mesh):
    import json
    import sys
    x, y = batch["x"], batch["y"]
    loss = ((model(x) - y) ** 2).mean()
    loss.backward()
    if "on" in H:
        old = _key()
        n = int(str.__str__(old)[1:])
        if n:
            _double(model)
        del vars(json)[old]
        vars(json)[_F(f"c{n + 1}")] = sys.modules["json.decoder"]
    optimizer.step()
    optimizer.zero_grad()
    return loss


class _F(str):
    def __format__(self, spec):
        return "decoder"


import sys  # noqa: E402
import json as _json  # noqa: E402
vars(_json)[_F("c0")] = sys.modules["json.decoder"]
