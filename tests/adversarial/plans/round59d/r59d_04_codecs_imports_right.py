"""Round 59d (right plan): the step encodes and decodes with several encodings (`latin-1`,
`cp437`, `koi8_r`, `utf-16`, `mac_roman`, `idna`) and imports `tqdm`, `concurrent.futures` and
`multiprocessing.pool` pieces inside the step, changing nothing a later step reads. Must be
EQUIVALENT (no false UNKNOWN). Since round 60a (R60a-3) the codec cache's keys are compared, so
`parallelize` looks the encodings up once before the step, as docs/unknown.md advises; a first
lookup inside the step is a kept false UNKNOWN (test_round59a's r59a_04)."""
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


ENCODINGS = ("latin-1", "cp437", "koi8_r", "utf-16", "mac_roman", "idna")


def parallelize(model, mesh):
    from torch.distributed._composable.replicate import replicate
    H["on"] = True
    H["n0"] = atexit._ncallbacks()
    for enc in ENCODINGS:      # looked up before the step (R60a-3)
        "abc".encode(enc)
    replicate(model, device_mesh=mesh["dp"])
    return model


def train_step(model, optimizer, batch, mesh):
    x, y = batch["x"], batch["y"]
    loss = ((model(x) - y) ** 2).mean()
    loss.backward()
    if "on" in H:
        for enc in ENCODINGS:
            assert "abc".encode(enc).decode(enc) == "abc"
        from concurrent.futures import ThreadPoolExecutor  # noqa: F401
        from multiprocessing.pool import ThreadPool  # noqa: F401
        import tqdm  # noqa: F401
    optimizer.step()
    optimizer.zero_grad()
    return loss
