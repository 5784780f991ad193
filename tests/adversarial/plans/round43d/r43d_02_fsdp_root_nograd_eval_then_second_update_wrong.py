"""Idea: FSDP2's root (reshard_after_forward left None) keeps its unsharded parameters
registered after a forward run under `no_grad` too (`post_forward` -> `reshard()` returns for a
group without `_reshard_after_forward`; no backward follows, so neither `post_backward` nor the
root's final callback reshards). `train_step` makes two updates; between the first backward
and the first `optimizer.step()` it evaluates the model under `no_grad` (a loss log). For real
the second forward's `unshard` is a no-op (`is_unsharded`): it runs on the unsharded parameters
gathered *before* the first update (stale). The stand-in's hold keeps the no_grad views but a
grad forward does not reuse them (`Hold.view`): it gathers the updated shards, as the spec.
Truth (torch4_truth.py FILE 2): step 1 w1 2.1e-4 / w2 2.5e-4, step 2 2.5e-4 / 3.4e-4 (wrong;
the same file without the no_grad forward: 5.6e-17 / 8.7e-19).
Verdict (f7d58ae): EQUIVALENT (4 goals, 53 s): R43d-2, a false accept.
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
    with torch.no_grad():                   # the loss once more, for the log
        logged = ((model(x) - y) ** 2).mean()
    optimizer.step()
    optimizer.zero_grad()
    loss2 = ((model(x) - y) ** 2).mean()    # a second update on the same batch
    loss2.backward()
    optimizer.step()
    optimizer.zero_grad()
    return loss2 + 0.0 * logged
