"""Idea: R43e-1 with a c10d collective instead of `.data`: r43d_02 (the root's no_grad loss
log between the first backward and the first update, then a second update) where the update
is written into the stored local shard by `dist.reduce_scatter_tensor` (after an all-gather of
the new shards: each rank gets its own new shard back). A `c10d` op marks no `Tensor(a!)` and
bumps no version counter, so `Hold.stale` passes; for real the second forward reuses the
pre-update unsharded parameters. A fix of R43e-1 that tracks `.data` alone misses this.
Truth (torch4_truth.py FILE 2): step 1 w1 2.1e-4 / w2 2.5e-4 (wrong, r43d_02's numbers).
Verdict (8a4a979): UNKNOWN (rc 2, 26 s; 0 goals): `c10d._reduce_scatter_base_` has no lowering
rule, and `torch.distributed.c10d_logger` state differs between the two steps. Sound, but only
by the missing rule; `dist.all_reduce` (lowered) cannot write a different shard per rank.
"""
MESH = {"dp": 2}
import torch
from torch import nn

SIZES = {"batch": 8, "hidden": 6, "ffn": 10}


class MLP(nn.Module):
    def __init__(self, h, f):
        super().__init__()
        self.w1 = nn.Linear(h, f, bias=False)
        self.w2 = nn.Linear(f, h, bias=False)

    def forward(self, x):
        return self.w2(nn.functional.silu(self.w1(x)))


def build_model(s):
    return MLP(s["hidden"], s["ffn"])


def make_batch(s):
    g = torch.Generator().manual_seed(0)
    return {"x": torch.randn(s["batch"], s["hidden"], generator=g),
            "y": torch.randn(s["batch"], s["hidden"], generator=g)}


def build_optimizer(model):
    return torch.optim.SGD(model.parameters(), lr=0.1)


def parallelize(model, mesh):
    from torch.distributed.fsdp import fully_shard
    fully_shard(model.w2, mesh=mesh["dp"])
    fully_shard(model, mesh=mesh["dp"])     # the root: reshard_after_forward None -> False
    return model


def _sgd_c10d(optimizer, mesh):
    """SGD; on the mesh the new shard is written into the stored one by a c10d collective
    (all-gather of the new shards, then a reduce-scatter (AVG) of the full tensor, which every
    rank holds, into the stored local shard: each rank gets its own new shard back)."""
    with torch.no_grad():
        for p in optimizer.param_groups[0]["params"]:
            if mesh is None:
                p.add_(p.grad, alpha=-0.1)
                continue
            import torch.distributed as dist
            group = mesh["dp"].get_group()
            loc = p.to_local()
            new = loc - 0.1 * p.grad.to_local()
            full = new.new_empty((2 * new.shape[0],) + tuple(new.shape[1:]))
            dist.all_gather_into_tensor(full, new.contiguous(), group=group)
            dist.reduce_scatter_tensor(loc, full, op=dist.ReduceOp.AVG, group=group)


def train_step(model, optimizer, batch, mesh):
    x, y = batch["x"], batch["y"]
    loss = ((model(x) - y) ** 2).mean()
    loss.backward()
    with torch.no_grad():                   # the loss once more, for the log
        logged = ((model(x) - y) ** 2).mean()
    _sgd_c10d(optimizer, mesh)              # the update through c10d
    optimizer.zero_grad()
    loss2 = ((model(x) - y) ** 2).mean()    # a second update on the same batch
    loss2.backward()
    _sgd_c10d(optimizer, mesh)
    optimizer.zero_grad()
    return loss2 + 0.0 * logged
