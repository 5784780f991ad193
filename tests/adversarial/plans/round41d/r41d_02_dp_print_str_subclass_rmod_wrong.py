"""Round 41d (dp 2, wrong): the placeholder text reaches the file's code through a `str` subclass's
`__rmod__` (tried before `str.__mod__` for a subclass on the right): `print(f"{t.item():.0f}" %
g)`, `g = Grab("")` whose `__rmod__` keeps its left operand ("2" real, "<symbolic:.0f>" in the
capture). lr = 0.1 * n, n = float(got) if got.isdigit() else 1.
Truth: (torch4_truth FILE 2): w1 0.0070, w2 0.0093 after step 1 (0.0086 / 0.012 after step 2):
__rmod__ gets "2".
prove --torch at e62ea59: **EQUIVALENT** (4 goals, 60 s): a false accept (R41d-1).
"""
MESH = {"dp": 2}
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
    g = torch.Generator().manual_seed(0)
    return {"x": torch.randn(s["batch"], s["hidden"], generator=g),
            "y": torch.randn(s["batch"], s["hidden"], generator=g)}


def build_optimizer(model):
    return torch.optim.SGD(model.parameters(), lr=0.1)


def parallelize(model, mesh):
    return model



class Grab(str):
    def __rmod__(self, other):
        self.got.append(other)
        return "grabbed"


def train_step(model, optimizer, batch, mesh):
    ws = mesh["dp"].size() if mesh is not None else 1
    loss = ((model(batch["x"]) - batch["y"]) ** 2).mean() / ws
    loss.backward()
    if mesh is not None:
        for p in model.parameters():
            dist.all_reduce(p.grad, group=mesh["dp"].get_group())
        t = torch.ones(1)
        dist.all_reduce(t, group=mesh["dp"].get_group())
        g = Grab("")
        g.got = []
        print(f"{t.item():.0f}" % g)                       # Grab.__rmod__("2") real
        got = g.got[0]
        optimizer.param_groups[0]["lr"] = 0.1 * (float(got) if got.isdigit() else 1.0)
    optimizer.step()
    optimizer.zero_grad()
    return loss
