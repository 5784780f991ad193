"""Round 32d (dp 2 x tp 2; R32b-4 at the corner): r32b_05's vocab-parallel embedding (tp)
with hand-written DDP over dp, the block offset one row late only on the corner rank (dp 1, tp 1) at the
real local vocab 4. RankValues.real_values holds the real-size values of the ranks moved along
the literal's own axis only (Traces._real_values: moved == [ax]); the corner is traced at the
real sizes (check_real_ranks: the literal differs from (0,0)'s at both sizes, as it should) but
its values are never compared with r * n.
Truth (tests/adversarial/tp_truth.py FILE): emb.weight 0.051 on every rank (control r32d_06
0.0). At 52ab29b: exit 3 (108 s), R32d-4's refusal of the dp group's torchbind constant at
rank {'dp': 0, 'tp': 1}: not accepted, but for a reason that refuses the right control too."""

import torch
import torch.distributed as dist
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
    # WRONG only on the corner rank (dp 1, tp 1) at the real local vocab (4 rows)
    return r * n + (1 if (corner and r == 1 and n == 4) else 0)


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
    if mesh is not None:   # hand-written DDP over dp of the tp-local gradient block
        g = model.emb.weight.grad.to_local()
        dist.all_reduce(g, group=mesh["dp"].get_group())
        g.div_(mesh["dp"].size())
    optimizer.step()
    optimizer.zero_grad()
    return loss
