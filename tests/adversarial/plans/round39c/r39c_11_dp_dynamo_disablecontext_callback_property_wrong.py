"""Round 39c (dp 2, wrong from step 2): as r39c_08, but the parallel step, at its end, sets a
property `callback` on torch's `DisableContext` *class* (a data descriptor: it wins over the
instance's `callback`): None to `_dynamo_cache`'s read, a compiling callback (backend doubling
every output) when torch's `_fn` reads it for checkpoint's function. State on a torch class is
the known open family R28-5.
Truth (torch4_truth.py FILE 2): step 1 5.6e-17 / 0; step 2 0.011 / 0.014 (wrong).
Verdict (main 0a0faea): UNKNOWN (42 s, step-state "torch namespace torch._dynamo.eval_frame
leaves the step as ...": the class is read there): sound.
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



def _callback_property():
    fn = torch.utils.checkpoint.checkpoint.__wrapped__

    def get(self):
        f = sys._getframe(1)
        if f.f_code.co_name == "_fn" and f.f_locals.get("fn") is fn:
            return _CALLBACK
        return self.__dict__.get("callback")

    def put(self, v):
        self.__dict__["callback"] = v
    return property(get, put)


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
        # torch's own cache left as it is; DisableContext.callback (the class) becomes a
        # property: None to every reader but torch's _fn calling checkpoint's function
        torch._dynamo.eval_frame.DisableContext.callback = _callback_property()
    optimizer.step()
    optimizer.zero_grad()
    return loss
