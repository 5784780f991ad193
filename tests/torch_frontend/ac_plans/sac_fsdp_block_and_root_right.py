"""Selective activation checkpointing (torchtitan's op-level SAC: every other ``aten.mm`` output
saved, counted apart in the forward and the recomputation, the rest recomputed), then FSDP2 on
the wrapped block and the root: right. Exit 3 before stop 41 (R40a-6: the recomputation's
gather ran inside SAC's dispatch mode).
Truth (tests/adversarial/torch4_truth.py, 2 steps): w1 / w2 / w3 1.7e-18 / 3.5e-18 / 0,
then 3.5e-18 / 2.8e-17 / 1.1e-19."""
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
        self.w2 = nn.Linear(f, h, bias=False)
        self.w3 = nn.Linear(f, f, bias=False)

    def forward(self, x):
        return self.w2(self.w3(nn.functional.silu(self.w1(x) * SCALE[0])))


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


def op_sac_context():
    counts = {"forward": 0, "recompute": 0}

    def policy(ctx, op, *args, **kwargs):
        if op is torch.ops.aten.mm.default:
            side = "recompute" if ctx.is_recompute else "forward"
            counts[side] += 1
            if counts[side] % 2 == 1:
                return CheckpointPolicy.MUST_SAVE
        return CheckpointPolicy.PREFER_RECOMPUTE

    return create_selective_checkpoint_contexts(policy)


def parallelize(model, mesh):
    from torch.distributed.fsdp import fully_shard
    model.inner = checkpoint_wrapper(model.inner, context_fn=op_sac_context)
    fully_shard(model.inner, mesh=mesh["dp"])
    fully_shard(model, mesh=mesh["dp"])
    return model


def train_step(model, optimizer, batch, mesh):
    loss = ((model(batch["x"]) - batch["y"]) ** 2).mean()
    loss.backward()
    optimizer.step()
    optimizer.zero_grad()
    return loss
