"""Round 41a (dp 2, right): nested checkpoint regions under FSDP2: an SAC region (``mm`` saved)
inside a full AC region, the outer region's module its own FSDP2 unit, then the root. Nothing
changes between the forward and the backward. A false-refusal check: the recomputation's gather
(outside SAC's modes) with two recomputations stacked.
Truth: step 1 3.5e-18 / 1.7e-18 / 5.6e-17; step 2 6.9e-18 / 1.7e-18 / 5.6e-17 (right).
Verdict (ec31448): EQUIVALENT (173 s): sound.
"""
MESH = {"dp": 2}
import torch
from torch import nn
from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import checkpoint_wrapper
from torch.utils.checkpoint import CheckpointPolicy, create_selective_checkpoint_contexts

SIZES = {"batch": 8, "hidden": 6, "ffn": 10}
SCALE = [1.0]


class Base(nn.Module):
    def __init__(self, h, f):
        super().__init__()
        self.w1 = nn.Linear(h, f, bias=False)
        self.w3 = nn.Linear(f, f, bias=False)
        self.w2 = nn.Linear(f, h, bias=False)

    def forward(self, x):
        return self.w2(nn.functional.silu(self.w3(self.w1(x) * SCALE[0])))


class Mid(nn.Module):
    def __init__(self, h, f):
        super().__init__()
        self.base = Base(h, f)

    def forward(self, x):
        return self.base(x) * SCALE[0]


class MLP(nn.Module):
    def __init__(self, h, f):
        super().__init__()
        self.inner = Mid(h, f)

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
    model.inner.base = checkpoint_wrapper(
        model.inner.base, context_fn=lambda: create_selective_checkpoint_contexts(policy))
    model.inner = checkpoint_wrapper(model.inner)
    from torch.distributed.fsdp import fully_shard
    fully_shard(model.inner, mesh=mesh["dp"])
    fully_shard(model, mesh=mesh["dp"])
    return model


def train_step(model, optimizer, batch, mesh):
    loss = ((model(batch["x"]) - batch["y"]) ** 2).mean()
    loss.backward()
    optimizer.step()
    optimizer.zero_grad()
    return loss
