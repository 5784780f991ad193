"""Round 35e (dp 2, wrong): r35e_01 through an unbacked SymInt and `str.format`: the step
all-reduces `torch.ones(1, dtype=torch.int64)`, `s = "{:d}".format(t.item())`, and
`n = int(s) if s.isdigit() else 1`. Real run "2"; capture at 7e4c002 "u0" (patched
`SymInt.__format__`); at 5455d86 TypeError (uncaught). `lr = 0.1 * n`.
Truth (torch4_truth FILE 2): w1 0.0070, w2 0.0093 after step 1 (0.0086 / 0.0118 after step 2).
prove --torch at 7e4c002: **EQUIVALENT** (4 goals, 45 s): a false accept (R35e-1). (5455d86 not
rerun: the same TypeError as r35e_01 expected, SymInt inherits object.__format__.)
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
    t = torch.ones(1, dtype=torch.int64)
    dist.all_reduce(t, group=mesh["dp"].get_group())
    s = "{:d}".format(t.item())                                # "2" real; "u0" in the capture
    return float(int(s)) if s.isdigit() else 1.0               # WRONG: real 2, no exception


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
