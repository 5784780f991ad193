"""Round 32d control of r32d_09 (r32d_06 with a functional all_reduce) (dp 2 x tp 2): the offset r * n on every rank.
Truth (tests/adversarial/tp_truth.py FILE): 0.0 on every rank. At 52ab29b: EQUIVALENT (2 goals,
98 s): right."""

import torch
import torch.distributed._functional_collectives as funcol
from torch import nn
from torch.distributed.tensor import Shard, distribute_tensor

MESH = {"dp": 2, "tp": 2}
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


def _offset(r, n, corner):
    return r * n + 0


def _embed(model, idx, mesh):
    if mesh is None:
        return model.emb(idx)
    w = model.emb.weight.to_local()
    n = w.shape[0]
    lo = _offset(mesh["tp"].get_local_rank(), n, mesh["dp"].get_local_rank() == 1)
    mask = (idx < lo) | (idx >= lo + n)
    local = idx - lo
    local[mask] = 0
    out = nn.functional.embedding(local, w)
    out[mask] = 0.0
    return out


def train_step(model, optimizer, batch, mesh):
    # linear in the embedding; the per-rank means averaged over dp
    loss = (_embed(model, batch["idx"], mesh) * batch["y"]).sum() / batch["idx"].shape[0]
    loss.backward()
    if mesh is not None:   # hand-written DDP over dp through functional collectives of the tp-local gradient block
        g = model.emb.weight.grad.to_local()
        g.copy_(funcol.all_reduce(g, "sum", mesh["dp"]) / mesh["dp"].size())
    optimizer.step()
    optimizer.zero_grad()
    return loss
