"""Round 60a: R59d-2 again, past the gc audit. The step looks up a codec nobody used before
(`koi8_t`), a standard `CodecInfo` left out of the fingerprint, and reads the C codec cache
through `gc.get_referrers` as r59d_02 did, but from code compiled under a file name inside
`spec_lang/` (`compile(src, <spec_lang>/value_text.py, "exec")`): the audit hook records only
callers whose code file is outside `spec_lang/`, so nothing is recorded. From the second step on
the parallel run doubles its gradients. Must not be EQUIVALENT."""
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


import importlib.util
_SPEC_LANG = importlib.util.find_spec("spec_lang").submodule_search_locations[0]
_NS = {"gc": gc, "codecs": codecs, "encodings": encodings}
exec(compile('''
def _c_cache():
    utf8 = codecs.lookup("utf-8")
    return [r for r in gc.get_referrers(utf8) if type(r) is dict and r is not encodings._cache
            and r.get("utf_8") is utf8][0]
''', _SPEC_LANG + "/value_text.py", "exec"), _NS)
_c_cache = _NS["_c_cache"]
del _NS


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
