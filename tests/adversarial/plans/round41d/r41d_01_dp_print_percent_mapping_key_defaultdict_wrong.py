"""Round 41d (dp 2, wrong): the placeholder text reaches a container through `%`'s mapping key:
`print(f"%({t.item():.0f})s" % SEEN)` on a local `defaultdict`. The f-string (left of `%`) is
"%(2)s" real, "%(<symbolic:.0f>)s" in the capture; `str.__mod__` looks the key up in SEEN
(`__missing__` inserts it). R41b-1's "no text in a subscript's index" does not see a `%`
key. lr = 0.1 * n, n = float(key) if key.isdigit() else 1.
Truth: (torch4_truth FILE 2): w1 0.0070, w2 0.0093 after step 1 (0.0086 / 0.012 after step 2): the
key is "2".
prove --torch at e62ea59: **EQUIVALENT** (4 goals, 57 s): a false accept (R41d-1).
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

import collections


def train_step(model, optimizer, batch, mesh):
    ws = mesh["dp"].size() if mesh is not None else 1
    loss = ((model(batch["x"]) - batch["y"]) ** 2).mean() / ws
    loss.backward()
    if mesh is not None:
        for p in model.parameters():
            dist.all_reduce(p.grad, group=mesh["dp"].get_group())
        t = torch.ones(1)
        dist.all_reduce(t, group=mesh["dp"].get_group())
        SEEN = collections.defaultdict(int)                # a local: no global changed
        print(f"%({t.item():.0f})s" % SEEN)                # inserts the key: "2" real
        key = next(iter(SEEN))
        optimizer.param_groups[0]["lr"] = 0.1 * (float(key) if key.isdigit() else 1.0)
    optimizer.step()
    optimizer.zero_grad()
    return loss
