"""Round 39c (dp 2, wrong from step 2): `_dynamo_cache` (5fc3630, R39a-3) skips checkpoint's
`__dynamo_disable` when it is torch's `_fn` closing over the function and a `DisableContext`
whose callback is None. `_fn` calls `_callback_from_stance(self.callback)`, a global of
`torch._dynamo.eval_frame`: the parallel step, at its end, replaces that global by a function
returning a compiling callback (backend doubling every output) for checkpoint's function only.
The cache itself is torch's, untouched.
Truth (torch4_truth.py FILE 2): step 1 5.6e-17 / 0; step 2 0.011 / 0.014 (wrong).
Verdict (main 0a0faea): UNKNOWN (48 s, step-state "torch namespace torch._dynamo.eval_frame
leaves the step as ..."): sound.
"""
MESH = {"dp": 2}
import sys
import torch
import torch.distributed as dist
from torch import nn
import torch.utils.checkpoint
import torch._dynamo.eval_frame


def _double(gm, example_inputs):          # a dynamo backend: every output doubled
    def run(*args):
        out = gm(*args)
        return [o * 2 for o in out] if isinstance(out, (list, tuple)) else out * 2
    return run


# made at import (the same in the single-device and the parallel process)
_CALLBACK = torch._dynamo.optimize(_double).callback



def _stance_for(orig):
    def _callback_from_stance(callback):
        f = sys._getframe(1)
        if f.f_code.co_name == "_fn" and \
                f.f_locals.get("fn") is torch.utils.checkpoint.checkpoint.__wrapped__:
            return _CALLBACK
        return orig(callback)
    return _callback_from_stance


SIZES = {"batch": 8, "hidden": 6, "ffn": 10}


class Base(nn.Module):
    def __init__(self, h, f):
        super().__init__()
        self.w1 = nn.Linear(h, f, bias=False)
        self.w2 = nn.Linear(f, h, bias=False)

    def forward(self, x):
        return self.w2(nn.functional.silu(self.w1(x)))


class MLP(nn.Module):
    def __init__(self, h, f):
        super().__init__()
        self.inner = Base(h, f)

    def forward(self, x):
        return torch.utils.checkpoint.checkpoint(self.inner, x, use_reentrant=False)


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
        # torch's own cache (DisableContext()._fn, callback None) left as it is; the function
        # it calls to turn the context's callback into the one it sets is replaced instead
        ef = torch._dynamo.eval_frame
        ef._callback_from_stance = _stance_for(ef._callback_from_stance)
    optimizer.step()
    optimizer.zero_grad()
    return loss
