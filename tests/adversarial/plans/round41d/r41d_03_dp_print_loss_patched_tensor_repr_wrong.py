"""Round 41d (dp 2, wrong): `print(loss.detach())` while `torch.Tensor.__repr__` is the file's
(patched for the print and restored): the real print calls it (a local counter), the capture's
skip takes any tensor as torch-formatted (`_symbolic`: "0") and calls no `str`. lr = 0.1 * (1 +
count).
Truth: (torch4_truth FILE 2): w1 0.0070, w2 0.0093 after step 1 (0.0086 / 0.012 after step 2): the
real print calls the patched __repr__ once, lr 0.2.
prove --torch at e62ea59: **EQUIVALENT** (4 goals, 84 s): a false accept (R41d-3: the real print
runs code the skip does not).
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
        calls = []
        orig = torch.Tensor.__repr__

        def loud(self, *a, **k):
            calls.append(1)
            return orig(self, *a, **k)

        torch.Tensor.__repr__ = loud
        try:
            print(loss.detach())
        finally:
            torch.Tensor.__repr__ = orig
        optimizer.param_groups[0]["lr"] = 0.1 * (1 + len(calls))
    optimizer.step()
    optimizer.zero_grad()
    return loss
