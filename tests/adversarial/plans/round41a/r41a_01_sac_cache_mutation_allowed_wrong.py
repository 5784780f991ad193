"""Round 41a (dp 2, wrong): selective AC with ``allow_cache_entry_mutation=True`` and an
in-place op on a saved (cached) tensor inside the block. The policy saves ``aten.mm``; the block
computes ``h = w1(x)`` (mm, saved), ``a = h * 3``, ``b = silu(a)`` (saves ``a``: recomputed), then
``h.mul_(2)``. The recomputation takes the cached ``h`` (the forward's storage, now ``2h``), so
silu's backward uses ``silu'(6h)`` where the single-device step (no checkpointing) uses
``silu'(3h)``. Gradients averaged by hand.
Truth (torch4_truth.py FILE 2): step 1 w1 0.0078, w2 0.077; step 2 0.013 / 0.072 (wrong).
Verdict (wip/sac41 ec31448): NOT EQUIVALENT (4 goals, 4 refuted, 41 s): sound.
"""
MESH = {"dp": 2}
import torch
from torch import nn
from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import checkpoint_wrapper
from torch.utils.checkpoint import CheckpointPolicy, create_selective_checkpoint_contexts

SIZES = {"batch": 8, "hidden": 6, "ffn": 10}
ALLOW = True


class Base(nn.Module):
    def __init__(self, h, f):
        super().__init__()
        self.w1 = nn.Linear(h, f, bias=False)
        self.w2 = nn.Linear(f, h, bias=False)

    def forward(self, x):
        h = self.w1(x)
        b = nn.functional.silu(h * 3.0)
        h.mul_(2.0)
        return self.w2(b)


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


def context():
    return create_selective_checkpoint_contexts(policy, allow_cache_entry_mutation=ALLOW)


def parallelize(model, mesh):
    model.inner = checkpoint_wrapper(model.inner, context_fn=context)
    return model


def train_step(model, optimizer, batch, mesh):
    ws = mesh["dp"].size() if mesh is not None else 1
    loss = ((model(batch["x"]) - batch["y"]) ** 2).mean() / ws
    loss.backward()
    if mesh is not None:
        for p in model.parameters():
            torch.distributed.all_reduce(p.grad, group=mesh["dp"].get_group())
    optimizer.step()
    optimizer.zero_grad()
    return loss
