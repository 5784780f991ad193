"""Round 38a (dp 2, wrong): R37b-3 through two *graph inputs* that share a storage: w2's weight
is a second Parameter viewing w1's storage (made in build_model), so `written_twice`'s roots
(one per placeholder) differ. The step scales the weights before the forward: the spec with one
`mul_` of w1 (both halve, one storage), the dp branch with
`torch._foreach_mul_([w1, w2], 0.5)`: the storage is halved twice in the real run.
Truth (torch4_truth.py FILE 1): w1 0.098, w2 0.098 (wrong: the storage quartered).
Verdict (main 4d89de3): NOT EQUIVALENT (58 s): sound.
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
    m = MLP(s["hidden"], s["ffn"])
    # w2's weight a second Parameter over w1's storage (a flat-parameter layout)
    m.w2.weight = nn.Parameter(m.w1.weight.data.view(s["hidden"], s["ffn"]))
    return m


def make_batch(s):
    g = torch.Generator().manual_seed(0)
    return {"x": torch.randn(s["batch"], s["hidden"], generator=g),
            "y": torch.randn(s["batch"], s["hidden"], generator=g)}


def build_optimizer(model):
    return torch.optim.SGD(model.parameters(), lr=0.1)


def parallelize(model, mesh):
    return model


def train_step(model, optimizer, batch, mesh):
    with torch.no_grad():
        if mesh is None:
            model.w1.weight.mul_(0.5)
        else:
            # WRONG: one storage listed twice through two parameters: a quarter in the real run
            torch._foreach_mul_([model.w1.weight, model.w2.weight], 0.5)
    ws = mesh["dp"].size() if mesh is not None else 1
    loss = ((model(batch["x"]) - batch["y"]) ** 2).mean() / ws
    loss.backward()
    if mesh is not None:
        for p in model.parameters():
            dist.all_reduce(p.grad, group=mesh["dp"].get_group())
    optimizer.step()
    optimizer.zero_grad()
    return loss
