"""Round 32d (dp 2 x tp 2): r32d_06's right vocab-parallel embedding (tp, hand-written masks
on the DTensor's to_local()) under FSDP2 over dp instead of a hand-written DDP (first draft of
r32d_05/06; the real run differs from single device although the offsets are right on every
rank; with lr 0 the truth is 0.0, so it is the step, not the truth's gather).
Truth (tests/adversarial/tp_truth.py FILE): emb.weight 0.095 on every rank (lr 0: 0.0).
At 52ab29b: UNKNOWN (115 s) "aten.bitwise_or.Tensor: a range test whose bounds are not the
rank's block of a sharded dim": sound."""

import torch
import torch.distributed as dist
from torch.distributed.fsdp import fully_shard
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
    fully_shard(model, mesh=mesh["dp"])
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
    optimizer.step()
    optimizer.zero_grad()
    return loss
