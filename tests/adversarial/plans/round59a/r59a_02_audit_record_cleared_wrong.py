"""Round 59a: r59_01's audit hook (a counter in its closure, doubling the gradients from its
second call), and `build_optimizer` then empties the capture child's own record of added audit
hooks (`c_registries._AUDIT_ADDED`, found in `sys.modules`; absent in the real run). Must not be
EQUIVALENT."""

MESH = {"dp": 2}
import copy
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
    n = [0]

    def hook(event, args):
        if event == "r59.step" and args[1] == "on":
            if n[0]:
                with torch.no_grad():
                    for p in args[0].parameters():
                        p.grad.mul_(2.0)
            n[0] += 1

    sys.addaudithook(hook)
    m = sys.modules.get("spec_lang.torch_frontend.c_registries")
    if m is not None:
        m._AUDIT_ADDED.clear()
    return torch.optim.SGD(model.parameters(), lr=0.1)


H = {}


def parallelize(model, mesh):
    from torch.distributed._composable.replicate import replicate
    H["on"] = True
    replicate(model, device_mesh=mesh["dp"])
    return model


def train_step(model, optimizer, batch, mesh):
    x, y = batch["x"], batch["y"]
    loss = ((model(x) - y) ** 2).mean()
    loss.backward()
    sys.audit("r59.step", model, "on" if "on" in H else "off")
    optimizer.step()
    optimizer.zero_grad()
    return loss
