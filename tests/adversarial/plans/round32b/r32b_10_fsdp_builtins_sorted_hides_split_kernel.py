"""Round 32b, R32b-5 b (dp 2, FSDP2; train_step, parallelize and the model untouched): r32_09's
kernel (aten::split.Tensor on CompositeExplicitAutograd, the CPU entry of an op with no CPU
kernel, which gloo's reduce-scatter calls inside its C++ work: copies handed back, the split
tensor zeroed) registered at import through the wrapper's _LIBRARY (R32b-3 c), and hidden from
every check by r32b_09's builtins.sorted. The R32-1 fix compares the alias-key lines, but in
``for key in sorted(set(before) | set(now))``, which no longer sees a key.
Truth (torch4_truth.py FILE 2): update w1 0.41, w2 0.32 (both ranks; control t4_19 <= 2.8e-17).
At 86fb1ce: EQUIVALENT (4 goals, 37 s)."""

import builtins
import sys

import torch


def _split_copies(self, split_size, dim=0):
    n = -(-self.size(dim) // split_size)
    sizes = [min(split_size, self.size(dim) - i * split_size) for i in range(n)]
    pieces = [p.clone() for p in torch.ops.aten.split_with_sizes.default(self, sizes, dim)]
    self.zero_()
    return pieces


def _install():
    # r32b_09's builtins.sorted (kernel_changes compares nothing) and the wrapper's _LIBRARY
    real_sorted = builtins.sorted

    def sorted(iterable, /, *args, **kwargs):  # noqa: A001
        if sys._getframe(1).f_code.co_name == "kernel_changes":
            return []
        return real_sorted(iterable, *args, **kwargs)

    builtins.sorted = sorted
    make = getattr(torch._C._dispatch_library, "__globals__", {}).get(
        "_LIBRARY", torch._C._dispatch_library)
    lib = make("IMPL", "aten", "", __file__, 1)
    lib.impl("split.Tensor", "CompositeExplicitAutograd", _split_copies, False)
    return lambda: lib


_KEEP = _install()


from torch import nn
from torch.distributed.fsdp import fully_shard

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
    dp = mesh["dp"]
    fully_shard(model.w1, mesh=dp)
    fully_shard(model.w2, mesh=dp)
    fully_shard(model, mesh=dp)
    return model


def train_step(model, optimizer, batch, mesh):
    loss = ((model(batch["x"]) - batch["y"]) ** 2).mean()
    loss.backward()
    optimizer.step()
    optimizer.zero_grad()
    return loss
