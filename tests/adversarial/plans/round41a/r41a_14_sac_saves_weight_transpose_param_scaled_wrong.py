"""Round 41a (dp 2, wrong): r41a_11 without FSDP2 (gradients averaged by hand): the policy saves
``aten.t`` of ``w1``, a view of the parameter, and the step doubles ``w1`` in place between the
forward and the backward. Expected SAC's version check to raise (default
``allow_cache_entry_mutation=False``); it does not: the recomputation reads the doubled ``w1``
through the cached view.
Truth: step 1 w1 0.0018, w2 0.013; step 2 0.0045 / 0.034 (wrong, no raise; as r41a_11/12).
Verdict (ec31448): NOT EQUIVALENT (146 s): sound (without FSDP2 the trace's cached view
reads the doubled parameter too; R41a-1 is FSDP2's refilled unsharded storage).
"""
MESH = {"dp": 2}
import functools

import torch
from torch import nn
from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import checkpoint_wrapper
from torch.utils.checkpoint import CheckpointPolicy, create_selective_checkpoint_contexts

ALLOW = False
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
        return self.inner(x)


def build_model(s):
    return MLP(s["hidden"], s["ffn"])


def make_batch(s):
    g = torch.Generator().manual_seed(0)
    return {"x": torch.randn(s["batch"], s["hidden"], generator=g),
            "y": torch.randn(s["batch"], s["hidden"], generator=g)}


def build_optimizer(model):
    return torch.optim.SGD(model.parameters(), lr=0.1)


def policy(ctx, op, *args, **kwargs):
    if op is torch.ops.aten.t.default:
        return CheckpointPolicy.MUST_SAVE
    return CheckpointPolicy.PREFER_RECOMPUTE


def parallelize(model, mesh):
    model.inner = checkpoint_wrapper(model.inner, context_fn=functools.partial(
        create_selective_checkpoint_contexts, policy, allow_cache_entry_mutation=ALLOW))
    return model


def _w1(model):
    inner = model.inner
    return (inner._checkpoint_wrapped_module if hasattr(inner, "_checkpoint_wrapped_module")
            else inner).w1.weight


def train_step(model, optimizer, batch, mesh):
    ws = mesh["dp"].size() if mesh is not None else 1
    loss = ((model(batch["x"]) - batch["y"]) ** 2).mean() / ws
    with torch.no_grad():
        _w1(model).mul_(2.0)
    loss.backward()
    if mesh is not None:
        for p in model.parameters():
            torch.distributed.all_reduce(p.grad, group=mesh["dp"].get_group())
    optimizer.step()
    optimizer.zero_grad()
    return loss
