"""Round 36c (dp 2, wrong): a collective whose answer is not a tensor. Round 36's
`fake_answers` leaves barriers alone ("no value"), but `dist.monitored_barrier` does answer: it
raises on a backend other than gloo. The step scales the learning rate by the number of ranks
that passed a `monitored_barrier(wait_all_ranks=True)` over dp, falling back to 1 (a rank
alone) when it raises. Real run (gloo): it passes, n = 2. Capture (torch's fake backend): torch
raises ValueError before any operator runs, nothing records it, the step takes 1.0 (the spec's
learning rate). `lr = 0.1 * n`.
Truth (torch4_truth FILE 1): w1 0.0070, w2 0.0093.
prove --torch at 072d231: **EQUIVALENT** (4 goals, 18 s): a false accept (R36c-3).
"""
MESH = {"dp": 2}
import torch
import torch.distributed as dist
from torch import nn
from torch.distributed import distributed_c10d as c10d

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
    return model


def _ranks_by_item(mesh):
    # WRONG (linear lr scaling by the ranks alive): a monitored barrier over dp with
    # wait_all_ranks; if it fails, carry on as one rank. On gloo it passes (2 ranks); on the
    # capture's fake backend torch raises ValueError ("only implemented for GLOO"): 1
    from datetime import timedelta
    group = mesh["dp"].get_group()
    try:
        dist.monitored_barrier(group=group, timeout=timedelta(seconds=30), wait_all_ranks=True)
        return float(dist.get_world_size(group=group))
    except Exception:
        return 1.0


def train_step(model, optimizer, batch, mesh):
    ws = mesh["dp"].size() if mesh is not None else 1
    loss = ((model(batch["x"]) - batch["y"]) ** 2).mean() / ws
    loss.backward()
    if mesh is not None:
        for p in model.parameters():
            dist.all_reduce(p.grad, group=mesh["dp"].get_group())
        optimizer.param_groups[0]["lr"] = 0.1 * _ranks_by_item(mesh)
    optimizer.step()
    optimizer.zero_grad()
    return loss
