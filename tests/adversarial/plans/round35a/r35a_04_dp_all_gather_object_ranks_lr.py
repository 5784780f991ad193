"""Round 35a (dp 2, wrong): an object collective in the step's own thread:
`dist.all_gather_object(objs, dist.get_rank(), group=dp)`; the number of distinct ranks gathered
scales the learning rate (`lr = 0.1 * len(set(objs))`): 2 in the real run; in the capture
whatever the fake process group gathers.
Truth (tests/adversarial/torch4_truth.py FILE 2): w1 0.0070, w2 0.0093 after step 1 (0.0086 / 0.0118 after step 2).
prove --torch at ff7d7f1: exit 3 at the all_gather_object line (45 when run; "NotImplementedError: argument
of type: <class 'torch.storage.UntypedStorage'>", 17 s): refused, sound.
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


def _distinct_ranks(mesh, ws):
    objs = [None] * ws
    dist.all_gather_object(objs, dist.get_rank(), group=mesh["dp"].get_group())
    return float(len(set(objs)))                          # WRONG: real 2


def train_step(model, optimizer, batch, mesh):
    ws = mesh["dp"].size() if mesh is not None else 1
    loss = ((model(batch["x"]) - batch["y"]) ** 2).mean() / ws
    loss.backward()
    if mesh is not None:
        for p in model.parameters():
            dist.all_reduce(p.grad, group=mesh["dp"].get_group())
        optimizer.param_groups[0]["lr"] = 0.1 * _distinct_ranks(mesh, ws)
    optimizer.step()
    optimizer.zero_grad()
    return loss
