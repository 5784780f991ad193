"""Round 60a: R59d-2 again, without gc. The step reads whether the C codec cache holds `koi8_t`
through the lookup's behaviour: it drops `koi8_t` from `encodings._cache` (the Python cache of
`encodings.search_function`), looks `koi8_t` up, and sees whether `encodings._cache` got the
entry back (a miss of the C cache calls the search function, which fills it; a hit does not),
then puts the C cache's `CodecInfo` back in it, as a plain lookup leaves both caches. The C
cache's new entry is a standard `CodecInfo` (left out, R59a-4) and no gc function runs: from
the second step on the parallel run doubles its gradients. Must not be EQUIVALENT."""
MESH = {"dp": 2}
import copy
import codecs
import encodings
import gc
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


def _c_cached(name):
    """Whether the interpreter's C codec cache holds ``name`` (looked up, so it does after)."""
    encodings._cache.pop(name, None)
    codecs.lookup(name)
    hit = name not in encodings._cache
    encodings._cache[name] = codecs.lookup(name)   # as a lookup leaves it
    return hit


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
        if _c_cached("koi8_t"):
            _double(model)
    optimizer.step()
    optimizer.zero_grad()
    return loss
