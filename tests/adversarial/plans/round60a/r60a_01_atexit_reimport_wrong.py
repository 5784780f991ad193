"""Round 60a: R59d-1 again, through the import machinery. `rlcompleter` (no one imports it
before the step) registers `lambda: readline.set_completer(None)` with `atexit` at module level.
The step drops it from `sys.modules` and imports it again, 1000 times: each is a real import
(`__spec__._initializing`, importlib's `_call_with_frames_removed`), so `watch_atexit` records
each lambda as registered by the import of `rlcompleter`, a module new in the step, and all 1000
are exempt; `atexit._ncallbacks()` counts them. From the second step on (500 or more callbacks
than when `parallelize` ran) the parallel run doubles its gradients. Must not be EQUIVALENT."""
MESH = {"dp": 2}
import copy
import atexit
import functools
import sys
import weakref
import torch
from torch import nn
from torch._library.fake_class_registry import FakeScriptObject
import torch._opaque_base

# torch's lazy class cache, filled as its first isinstance miss would (same on both sides)
torch._opaque_base._FakeScriptObject_cls = FakeScriptObject

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
    H["n0"] = atexit._ncallbacks()
    replicate(model, device_mesh=mesh["dp"])
    return model


def train_step(model, optimizer, batch, mesh):
    x, y = batch["x"], batch["y"]
    loss = ((model(x) - y) ** 2).mean()
    loss.backward()
    if "on" in H:
        if atexit._ncallbacks() - H["n0"] >= 500:
            _double(model)
        for _ in range(1000):
            sys.modules.pop("rlcompleter", None)
            import rlcompleter
    optimizer.step()
    optimizer.zero_grad()
    return loss
