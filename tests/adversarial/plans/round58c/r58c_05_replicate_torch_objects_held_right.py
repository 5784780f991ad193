"""Adversarial round 58c (false UNKNOWN probe): r58b_03's template without its counter
(composable replicate), with torch objects from modules the train file imports held on the
model: a DDP comm hook function (`default_hooks.allreduce_hook`), the `DistributedDataParallel`
class, a `CheckpointImpl` enum member. A right plan: must be EQUIVALENT."""
MESH = {"dp": 2}
import copy
import functools
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
    from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
    from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import CheckpointImpl
    m = MLP(s["hidden"], s["ffn"])
    m.comm_hook = default_hooks.allreduce_hook
    m.ddp_cls = torch.nn.parallel.DistributedDataParallel
    m.ckpt_impl = CheckpointImpl.NO_REENTRANT
    return m


def build_optimizer(model):
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    return opt


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


def train_step(model, optimizer, batch, mesh):
    import json
    x, y = batch["x"], batch["y"]
    loss = ((model(x) - y) ** 2).mean()
    loss.backward()
    optimizer.step()
    optimizer.zero_grad()
    return loss

