"""Round 65g (r65g_02): a right plan (examples/torch/mlp_ddp.py) whose train file puts into sys.modules a hand-made module with a namespace-package spec (importlib NamespaceLoader, no origin) whose submodule_search_locations raises when iterated. registry_state.import_origin -> _namespace_package calls list(locations): the user exception escapes the fingerprint. Expected: EQUIVALENT, or UNKNOWN / refused with a reason; not an internal error (exit 3)."""
"""A hand-written DDP (the smallest ``prove --torch`` example): each rank computes the loss on
its shard of the batch, all-reduces the gradients with ``torch.distributed.all_reduce`` and
divides by the data-parallel world size, then SGD steps. Proves EQUIVALENT.

    prove --torch examples/torch/mlp_ddp.py

Its buggy twin ``mlp_ddp_sum_buggy.py`` leaves out the division.
"""

import torch
import torch.distributed as dist
from torch import nn

MESH = {"dp": 2}
SIZES = {"batch": 8, "hidden": 6, "ffn": 10}


class MLP(nn.Module):
    def __init__(self, h, f):
        super().__init__()
        self.w1 = nn.Linear(h, f, bias=False)
        self.w2 = nn.Linear(f, h, bias=False)

    def forward(self, x):
        return self.w2(nn.functional.silu(self.w1(x)))


def build_model(s):
    return MLP(s["hidden"], s["ffn"])


def make_batch(s):
    return {"x": torch.zeros(s["batch"], s["hidden"]), "y": torch.zeros(s["batch"], s["hidden"])}


def build_optimizer(model):
    return torch.optim.SGD(model.parameters(), lr=0.1)


def parallelize(model, mesh):
    return model


def train_step(model, optimizer, batch, mesh):
    loss = ((model(batch["x"]) - batch["y"]) ** 2).mean()
    loss.backward()
    if mesh is not None:
        for p in model.parameters():
            dist.all_reduce(p.grad, group=mesh["dp"].get_group())
            p.grad.div_(mesh["dp"].size())
    optimizer.step()
    optimizer.zero_grad()
    return loss


import sys as _sys
import types as _types
import importlib.machinery as _mach


class _Locations:
    def __iter__(self):
        raise RuntimeError("r65g: iterated")


_M = _types.ModuleType("r65g_ns")
_S = _mach.ModuleSpec("r65g_ns", _mach.NamespaceLoader("r65g_ns", ["/tmp"], None),
                      is_package=True)
_S.submodule_search_locations = _Locations()
_M.__spec__ = _S
_sys.modules["r65g_ns"] = _M
