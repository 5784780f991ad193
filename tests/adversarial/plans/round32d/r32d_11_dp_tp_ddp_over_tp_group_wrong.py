"""Round 32d, R32d-4's mutants (dp 2 x tp 2, wrong): r32d_07 with the hand-written DDP
all-reduce over the tp group (the batch is split over dp; tp ranks hold the same shard, so the
sum over tp is twice the local gradient, divided by |dp| = 2: each rank keeps its own shard's
gradient). Once the dp group is compared by axis (R32d-4's fix), the group argument must map to
its own axis per rank (Traces.pg_axis).
Truth (tests/adversarial/tp_truth.py FILE): w1 0.0088, w2 0.018 on every rank."""
MESH = {"dp": 2, "tp": 2}
import torch
import torch.distributed as dist
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
    return {"x": torch.zeros(s["batch"], s["hidden"]), "y": torch.zeros(s["batch"], s["hidden"])}


def build_optimizer(model):
    return torch.optim.SGD(model.parameters(), lr=0.1)


def parallelize(model, mesh):
    return model


def train_step(model, optimizer, batch, mesh):
    loss = ((model(batch["x"]) - batch["y"]) ** 2).mean()
    loss.backward()
    if mesh is not None:
        for p in model.parameters():
            dist.all_reduce(p.grad, group=mesh["tp"].get_group())   # WRONG: tp, not dp
            p.grad.div_(mesh["dp"].size())
    optimizer.step()
    optimizer.zero_grad()
    return loss
