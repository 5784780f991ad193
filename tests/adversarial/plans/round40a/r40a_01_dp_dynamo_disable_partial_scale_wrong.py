"""Round 40a (dp 2, wrong from step 2): `process_state._fn_attrs` reads a torch function's own
attributes by `_ident`, which names anything but a function / module / builtin by its type
only. Both steps leave `torch.utils.checkpoint.checkpoint.__wrapped__.__dynamo_disable` (what
torch's `_disable_dynamo` wrapper calls at every `checkpoint`) as a `functools.partial` of the
same function; the single-device one scales by 1.0, the parallel one by 2.0. Both read
`functools.partial`: from step 2 on the ranks' checkpointed block output is doubled.
Truth (torch4_truth.py FILE 2): step 1 w1 5.6e-17, w2 0; step 2 w1 0.011, w2 0.014 (wrong).
Verdict (main 05940a8): EQUIVALENT (4 goals, 20 s): false accept R40a-1.
"""
MESH = {"dp": 2}
import functools

import torch
import torch.distributed as dist
from torch import nn
import torch.utils.checkpoint

SIZES = {"batch": 8, "hidden": 6, "ffn": 10}


def _scaled(*args, scale, **kwargs):
    return torch.utils.checkpoint.checkpoint.__wrapped__(*args, **kwargs) * scale


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
    fn = torch.utils.checkpoint.checkpoint.__wrapped__
    fn.__dynamo_disable = functools.partial(_scaled, scale=1.0 if mesh is None else 2.0)
    optimizer.step()
    optimizer.zero_grad()
    return loss
