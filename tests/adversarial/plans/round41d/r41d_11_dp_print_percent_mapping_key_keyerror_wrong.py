"""Round 41d (dp 2, wrong): R41d-1 with a plain dict and no code of the file's: `print(f"%({t.
item():.0f})s" % names)`, `names = {"2": ...}`; real: the key "2" is found; capture: the key
"<symbolic:.0f>" raises KeyError, which `caught.py` lets through (a lookup in the file's own
container), and the step takes its except branch (lr 0.1 = the spec's; real 0.2).
Truth: (torch4_truth FILE 2): w1 0.0070, w2 0.0093 after step 1 (0.0086 / 0.012 after step 2): no
KeyError, lr 0.2.
prove --torch at e62ea59: **EQUIVALENT** (4 goals, 83 s): a false accept (R41d-1 with a plain dict
and no code of the file's).
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



def train_step(model, optimizer, batch, mesh):
    ws = mesh["dp"].size() if mesh is not None else 1
    loss = ((model(batch["x"]) - batch["y"]) ** 2).mean() / ws
    loss.backward()
    if mesh is not None:
        for p in model.parameters():
            dist.all_reduce(p.grad, group=mesh["dp"].get_group())
        t = torch.ones(1)
        dist.all_reduce(t, group=mesh["dp"].get_group())
        names = {"2": "two ranks"}
        try:
            print(f"%({t.item():.0f})s" % names)           # names["2"] real: no error
            lr = 0.2
        except KeyError:                                   # the capture: "<symbolic:.0f>"
            lr = 0.1
        optimizer.param_groups[0]["lr"] = lr
    optimizer.step()
    optimizer.zero_grad()
    return loss
