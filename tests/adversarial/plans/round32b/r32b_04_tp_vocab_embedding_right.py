"""Round 32b, control of r32b_05 (tp 2, right): a hand-written vocab-parallel embedding. The
weight is a DTensor Shard(0) over tp; each rank masks the tokens outside its block
[r*n, r*n+n) (lt / ge / bitwise_or), shifts the others by r*n (sub), embeds with its local rows
and zeroes the masked outputs; the loss (sum of embedding * y) is linear in the embedding, so each
rank's gradient of its block is the block of the single-device gradient (no collective).
Truth (tests/adversarial/tp_truth.py FILE, gloo, float64): 0.0 on both ranks.
At 6749c1d + R32b-1's fix: EQUIVALENT (2 goals, 35 s)."""

import torch
from torch import nn
from torch.distributed.tensor import Shard, distribute_tensor

MESH = {"tp": 2}
SIZES = {"batch": 4, "seq": 3, "vocab": 8, "hidden": 6}


class Emb(nn.Module):
    def __init__(self, v, h):
        super().__init__()
        self.emb = nn.Embedding(v, h)

    def forward(self, idx):
        return self.emb(idx)


def build_model(s):
    return Emb(s["vocab"], s["hidden"])


def make_batch(s):
    return {"idx": torch.zeros(s["batch"], s["seq"], dtype=torch.long),
            "y": torch.zeros(s["batch"], s["seq"], s["hidden"])}


def build_optimizer(model):
    return torch.optim.SGD(model.parameters(), lr=0.1)


def parallelize(model, mesh):
    # vocab-parallel: each tp rank holds its block of the embedding's rows
    w = model.emb.weight
    model.emb.weight = nn.Parameter(distribute_tensor(w.detach(), mesh["tp"], [Shard(0)]))
    return model


def _offset(r, n):
    return r * n


def _embed(model, idx, mesh):
    if mesh is None:
        return model.emb(idx)
    w = model.emb.weight.to_local()
    n = w.shape[0]
    lo = _offset(mesh["tp"].get_local_rank(), n)
    mask = (idx < lo) | (idx >= lo + n)
    local = idx - lo
    local[mask] = 0
    out = nn.functional.embedding(local, w)
    out[mask] = 0.0
    return out


def train_step(model, optimizer, batch, mesh):
    # linear in the embedding: the sum of the ranks' losses is the single-device loss, and each
    # rank's gradient of its block is the block of the single-device gradient
    loss = (_embed(model, batch["idx"], mesh) * batch["y"]).sum()
    loss.backward()
    optimizer.step()
    optimizer.zero_grad()
    return loss
