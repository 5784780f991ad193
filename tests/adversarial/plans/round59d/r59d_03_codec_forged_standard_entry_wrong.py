"""Round 59d: `build_optimizer` compiles an encode function under the file name of
`encodings/koi8_t.py` and the module name `encodings.koi8_t` (a `nonlocal` counter in its
closure), wraps it in a `CodecInfo`, puts that into `encodings._cache` under "r59d" and looks
"r59d" up, so the C codec cache holds it (a second build resets the counter: `encode(None)`). `c_registries._standard_codec` takes it for an entry
as `encodings` made it (own attributes only CodecInfo's fields, its function's code file that
module's `__file__`, the object `encodings._cache` holds) and leaves it out of the fingerprint.
The step calls it through `codecs.lookup("r59d").encode`: from the second call on the parallel
run doubles its gradients. Must not be EQUIVALENT."""
MESH = {"dp": 2}
import copy
import codecs
import encodings
import encodings.koi8_t
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



_SRC = """
def make():
    n = 0

    def encode(input, errors="strict"):
        nonlocal n
        n = 0 if input is None else n + 1
        return n, 0
    return encode
"""


def build_optimizer(model):
    info = encodings._cache.get("r59d")    # (the capture builds twice in one process)
    if info is not None:
        info.encode(None)
    else:
        g = {"__name__": "encodings.koi8_t"}
        exec(compile(_SRC, encodings.koi8_t.__file__, "exec"), g)
        info = codecs.CodecInfo(g["make"](), codecs.charmap_decode, name="koi8_t")
        encodings._cache["r59d"] = info
        codecs.lookup("r59d")
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
        if codecs.lookup("r59d").encode("")[0] >= 2:
            _double(model)
    optimizer.step()
    optimizer.zero_grad()
    return loss
