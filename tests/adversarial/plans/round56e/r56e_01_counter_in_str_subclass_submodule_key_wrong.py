"""Adversarial round 56e: the step counter is an attribute of a ``str`` subclass key in ``json``'s namespace: the train file replaces the key ``"decoder"`` (whose value is the submodule ``json.decoder``) by ``_K("decoder")`` at import, and each step by a new ``_K("decoder")`` with ``n = old.n + 1``. ``process_state._process_state`` skips an entry whose value is ``sys.modules[f"{name}.{k}"]`` (a submodule, set by its import) before it reads the key, so the key's text (``key_text``: its identity and own attributes) is never taken. No user code runs in the fingerprint. From the second step on the parallel run doubles its gradients. Must not be EQUIVALENT."""
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
    return next(k for k in vars(json) if k == "decoder")


def train_step(model, optimizer, batch, mesh):
    import json
    import sys
    x, y = batch["x"], batch["y"]
    loss = ((model(x) - y) ** 2).mean()
    loss.backward()
    if "on" in H:
        old = _key()
        n = old.n
        if n:
            _double(model)
        new = _K("decoder")
        new.n = n + 1
        del vars(json)[old]
        vars(json)[new] = sys.modules["json.decoder"]
    optimizer.step()
    optimizer.zero_grad()
    return loss


class _K(str):
    pass


import sys  # noqa: E402
import json as _json  # noqa: E402
_k0 = _K("decoder")
_k0.n = 0
del vars(_json)["decoder"]
vars(_json)[_k0] = sys.modules["json.decoder"]
del _k0
