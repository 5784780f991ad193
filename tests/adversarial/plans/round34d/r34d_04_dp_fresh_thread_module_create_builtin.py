"""Round 34d (dp 2, wrong): R34d-2: a fresh, unwrapped copy of the builtin `_thread` module,
made in the step with `_imp.create_builtin(ModuleSpec("_thread", BuiltinImporter))` (`_thread`
is multi-phase init, so each call returns a new module with the original functions; the guard
wraps the attributes of the one in `sys.modules`). Its `start_new_thread` runs the second
all-reduce of every gradient; the step waits for the copy's `_count()` to fall back.
Truth (tests/adversarial/torch4_truth.py FILE 2): w1 0.0070, w2 0.0093 after step 1
(0.0086 / 0.012 after step 2).
prove --torch at 0795de7: **EQUIVALENT** (4 goals by rewriting, 46 s): a false accept.
Control: r34d_05 (EQUIVALENT, 60 s)."""
MESH = {"dp": 2}
import torch
import torch.distributed as dist
from torch import nn
import _imp
import importlib.machinery
import time

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
    g = torch.Generator().manual_seed(0)
    return {"x": torch.randn(s["batch"], s["hidden"], generator=g),
            "y": torch.randn(s["batch"], s["hidden"], generator=g)}


def build_optimizer(model):
    return torch.optim.SGD(model.parameters(), lr=0.1)


def parallelize(model, mesh):
    return model


def train_step(model, optimizer, batch, mesh):
    ws = mesh["dp"].size() if mesh is not None else 1
    loss = ((model(batch["x"]) - batch["y"]) ** 2).mean() / ws
    loss.backward()
    if mesh is not None:
        for p in model.parameters():
            dist.all_reduce(p.grad, group=mesh["dp"].get_group())
        def again(*_):
            for p in model.parameters():
                dist.all_reduce(p.grad, group=mesh["dp"].get_group())   # WRONG: summed twice
        # a fresh copy of the builtin _thread module (multi-phase init): its starters unwrapped
        th = _imp.create_builtin(importlib.machinery.ModuleSpec(
            "_thread", importlib.machinery.BuiltinImporter, origin="built-in"))
        c0 = th._count()
        th.start_new_thread(again, ())
        time.sleep(0.05)
        while th._count() > c0:
            time.sleep(0.001)
        time.sleep(0.01)
    optimizer.step()
    optimizer.zero_grad()
    return loss
