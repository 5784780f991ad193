"""Round 41b (dp 2, wrong): `print(t)` with t a Tensor subclass whose `__repr__` is the file's
(counts): `_plain_value` takes any `isinstance(a, torch.Tensor)` as torch-formatted, so the
capture neither calls `str` nor prints. lr = 0.1 * (1 + count).
Truth (torch4_truth FILE 2): w1 0.0070, w2 0.0093 after step 1 (0.0086 / 0.012 after step 2):
the real print calls the subclass's __repr__.
prove --torch at a323fd2: exit 3 (30 s) at the `as_subclass` line: "Creating a new Tensor
subclass Loud but the raw Tensor object is already associated to a python object of type
Fake...": sound (the capture cannot build the subclass; the `isinstance` in `_plain_value` stays
a latent gap).
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

COUNT = [0]


class Loud(torch.Tensor):
    def __repr__(self, *a, **k):
        COUNT[0] += 1
        return "Loud"


def train_step(model, optimizer, batch, mesh):
    ws = mesh["dp"].size() if mesh is not None else 1
    loss = ((model(batch["x"]) - batch["y"]) ** 2).mean() / ws
    loss.backward()
    if mesh is not None:
        for p in model.parameters():
            dist.all_reduce(p.grad, group=mesh["dp"].get_group())
        COUNT[0] = 0
        t = torch.ones(1).as_subclass(Loud)
        print(t)
        optimizer.param_groups[0]["lr"] = 0.1 * (1 + COUNT[0])
    optimizer.step()
    optimizer.zero_grad()
    return loss
