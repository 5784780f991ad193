"""Round 41a (dp 2, wrong): the step runs the forward under a ``TorchDispatchMode`` of the train
file that doubles ``silu``'s output; SAC (``mm`` saved) recomputes ``silu`` in the backward,
where the mode is no longer active: ``w2``'s gradient uses ``silu(z)`` where the single-device
step (no checkpointing: the forward's saved ``2 silu(z)``) uses twice that. Gradients averaged
by hand after the mode has exited.
Truth: step 1 w2 0.0064; step 2 w1 0.00016, w3 0.00012, w2 0.0090 (wrong).
Verdict (ec31448): NOT EQUIVALENT (185 s): sound.
"""
MESH = {"dp": 2}
import torch
from torch import nn
from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import checkpoint_wrapper
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils.checkpoint import CheckpointPolicy, create_selective_checkpoint_contexts

SIZES = {"batch": 8, "hidden": 6, "ffn": 10}


class Doubler(TorchDispatchMode):
    """Doubles ``silu``'s output while active (the forward only)."""

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        if func is torch.ops.aten.silu.default:
            out = out * 2.0
        return out


class Base(nn.Module):
    def __init__(self, h, f):
        super().__init__()
        self.w1 = nn.Linear(h, f, bias=False)
        self.w3 = nn.Linear(f, f, bias=False)
        self.w2 = nn.Linear(f, h, bias=False)

    def forward(self, x):
        return self.w2(nn.functional.silu(self.w3(self.w1(x))))


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
    if op is torch.ops.aten.mm.default:
        return CheckpointPolicy.MUST_SAVE
    return CheckpointPolicy.PREFER_RECOMPUTE


def parallelize(model, mesh):
    model.inner = checkpoint_wrapper(
        model.inner, context_fn=lambda: create_selective_checkpoint_contexts(policy))
    return model


def train_step(model, optimizer, batch, mesh):
    ws = mesh["dp"].size() if mesh is not None else 1
    with Doubler():
        out = model(batch["x"])
    loss = ((out - batch["y"]) ** 2).mean() / ws
    loss.backward()
    if mesh is not None:
        for p in model.parameters():
            torch.distributed.all_reduce(p.grad, group=mesh["dp"].get_group())
    optimizer.step()
    optimizer.zero_grad()
    return loss
