"""Idea: R43d-2 with the extra forward *recording autograd* (its output unused): the root's
views from it stay held (no backward reaches them), the second forward of the step reuses them
in the stand-in as FSDP2 reuses its unsharded parameters (both stale after the first update);
the stand-in's gathered_then_written should refuse the backward through views whose shards the
optimizer wrote, or the proof refute. Soundness check of the reuse path.
Truth (torch4_truth.py FILE 2): as r43d_02 (step 1 w1 2.1e-4 / w2 2.5e-4: wrong).
Verdict (f7d58ae): exit 3 (14 s, `gathered_then_written` at the second forward's line): sound
(its message says FSDP2 gathers again for the backward; for this root it does not: stale).
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


def train_step(model, optimizer, batch, mesh):
    x, y = batch["x"], batch["y"]
    loss = ((model(x) - y) ** 2).mean()
    loss.backward()
    logged = ((model(x) - y) ** 2).mean().detach()   # the log, autograd left on
    optimizer.step()
    optimizer.zero_grad()
    loss2 = ((model(x) - y) ** 2).mean()    # a second update on the same batch
    loss2.backward()
    optimizer.step()
    optimizer.zero_grad()
    return loss2 + 0.0 * logged
