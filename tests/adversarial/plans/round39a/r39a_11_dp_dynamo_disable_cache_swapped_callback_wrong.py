"""Round 39a (dp 2, wrong from step 2): `step_state` skips a function's `__dynamo_disable`
when it is torch's `DisableContext.__call__._fn` closing over the function (`_dynamo_cache`,
e505167), without reading the `DisableContext` it also closes over. At the end of the parallel
step only, checkpoint's cache is replaced by a real `DisableContext()(fn)` whose `callback` is
set to a dynamo callback compiling with a backend that doubles every output: the next
`torch.utils.checkpoint.checkpoint` runs the block compiled by that backend (its output doubled)
on the ranks, the single-device run does not.
Truth (torch4_truth.py FILE 2): step 1 w1 5.6e-17, w2 0; step 2 w1 0.011, w2 0.014 (wrong).
Verdict (main 6e50b4f): EQUIVALENT (4 goals, 79 s): false accept R39a-3.
"""
MESH = {"dp": 2}
import torch
import torch.distributed as dist
from torch import nn
import torch.utils.checkpoint
from torch._dynamo.eval_frame import DisableContext


def _double(gm, example_inputs):          # a dynamo backend: every output doubled
    def run(*args):
        out = gm(*args)
        return [o * 2 for o in out] if isinstance(out, (list, tuple)) else out * 2
    return run


# made at import (the same in the single-device and the parallel process)
_CALLBACK = torch._dynamo.optimize(_double).callback

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
        # torch's own cache of checkpoint's dynamo-disabled form, replaced by torch's own
        # DisableContext._fn closing over the same function, its context's callback swapped
        fn = torch.utils.checkpoint.checkpoint.__wrapped__
        ctx = DisableContext()
        ctx.callback = _CALLBACK
        fn.__dynamo_disable = ctx(fn)
    optimizer.step()
    optimizer.zero_grad()
    return loss
