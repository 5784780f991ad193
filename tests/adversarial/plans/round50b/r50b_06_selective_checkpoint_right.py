"""Round 50b (control): a right plan with selective activation checkpointing (torch.utils.checkpoint.create_selective_checkpoint_contexts: torch's caching dispatch modes save aten.mm) around w1 inside FSDP2. Must be EQUIVALENT (not refused)."""
MESH = {"dp": 2}
import torch
from torch import nn

SIZES = {"batch": 8, "hidden": 6, "ffn": 10}


class MLP(nn.Module):
    def __init__(self, h, f):
        super().__init__()
        self.w0 = nn.Linear(h, h, bias=False)
        self.w1 = nn.Linear(h, f, bias=False)
        self.w2 = nn.Linear(f, h, bias=False)

    def forward(self, x):
        import functools
        from torch.utils.checkpoint import (CheckpointPolicy, checkpoint,
                                            create_selective_checkpoint_contexts)

        def policy(ctx, op, *args, **kwargs):
            return CheckpointPolicy.MUST_SAVE if op is torch.ops.aten.mm.default \
                else CheckpointPolicy.PREFER_RECOMPUTE
        ctx = functools.partial(create_selective_checkpoint_contexts, policy)
        h = checkpoint(lambda t: nn.functional.silu(self.w1(t)), torch.tanh(self.w0(x)),
                       use_reentrant=False, context_fn=ctx)
        return self.w2(h)


def make_batch(s):
    g = torch.Generator().manual_seed(0)
    return {"x": torch.randn(s["batch"], s["hidden"], generator=g),
            "y": torch.randn(s["batch"], s["hidden"], generator=g)}


def build_optimizer(model):
    return torch.optim.SGD(model.parameters(), lr=0.1)

SEEN = []


def double(model):
    with torch.no_grad():
        for p in model.parameters():
            if p.grad is not None:
                p.grad.mul_(2.0)


def parallelize(model, mesh):
    from torch.distributed.fsdp import fully_shard
    fully_shard(model.w1, mesh=mesh["dp"])
    fully_shard(model.w2, mesh=mesh["dp"])
    fully_shard(model, mesh=mesh["dp"])
    return model


def build_model(s):
    m = MLP(s["hidden"], s["ffn"])
    return m


def train_step(model, optimizer, batch, mesh):
    x, y = batch["x"], batch["y"]
    loss = ((model(x) - y) ** 2).mean()
    loss.backward()
    optimizer.step()
    optimizer.zero_grad()
    return loss
