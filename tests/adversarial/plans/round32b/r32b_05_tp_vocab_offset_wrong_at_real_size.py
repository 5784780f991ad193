"""Round 32b, R32b-4 (tp 2; the gap real_ranks.py's docstring lists): r32b_04 whose block offset
on rank 1 is r*n + 1 when the local vocab is the real 4 (r*n at every other size): rank 1 at the
real sizes masks [5, 9) and shifts by 5, so tokens 4 get nothing and tokens 5..7 update the
wrong rows. The rank-dependent literals (lt 0 / 4 at probe vs lt 0 / 5 at real, sub, ge) differ
between the ranks at both sizes at the same places, so check_real_ranks passes; the index rules
(rules_index._block) check the offsets per rank at the probe sizes (affine r*n) and at the real
sizes on rank 0 only (RankValues.real), whose offset 0 is right.
Truth (tests/adversarial/tp_truth.py FILE): emb.weight 0.27 on both ranks (control r32b_04
0.0). At 6749c1d + R32b-1's fix: EQUIVALENT (2 goals, 35 s); at 86fb1ce: EQUIVALENT (2 goals, 44 s)."""

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
    # rank 1 at the real local vocab (4 rows) only: its block starts one row late
    return r * n + (1 if (r == 1 and n == 4) else 0)


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
