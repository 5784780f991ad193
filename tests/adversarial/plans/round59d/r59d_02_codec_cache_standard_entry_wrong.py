"""Round 59d: the step looks up a codec nobody used before (`koi8_t`); the C codec cache's new
entry is a `CodecInfo` exactly as `encodings` made it, so `c_registries._standard_codec` leaves
it out of the fingerprint. The step reads the C cache itself (the dict `gc.get_referrers` names
as a holder of the `utf-8` `CodecInfo`, other than `encodings._cache`): whether `koi8_t` is
cached is the flag. From the second step on the parallel run doubles its gradients. Must not be
EQUIVALENT."""
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


def _c_cache():
    utf8 = codecs.lookup("utf-8")
    return [r for r in gc.get_referrers(utf8) if type(r) is dict and r is not encodings._cache
            and r.get("utf_8") is utf8][0]


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
        if "koi8_t" in _c_cache():
            _double(model)
        codecs.lookup("koi8_t")
    optimizer.step()
    optimizer.zero_grad()
    return loss
