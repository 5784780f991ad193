"""Round 38b (dp 2, wrong): R38b-2's family with a library frame instead of `eval`: the text of a
gradient made by numpy's `array2string` (Python code in site-packages, neither torch's nor the
standard library's) of an object array holding the tensor. TEXTS' walk up the stack stops at
numpy's frame. Real run: "[tensor([[..." (`n = 2.0`); capture: no values (`n = 1.0`).
`lr = 0.1 * n`.
Truth (torch4_truth.py FILE 1): w1 0.0070, w2 0.0093 (wrong: lr 0.2 in the real run).
Verdict (wip/r38 ac0f305): **EQUIVALENT** (4 goals, 83 s): false accept R38b-2.
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


def _n(g):
    # WRONG: the text of a fake tensor, made by numpy's printing code
    import numpy as np
    a = np.empty(1, dtype=object)
    a[0] = g
    return 2.0 if "tensor([" in np.array2string(a) else 1.0


def train_step(model, optimizer, batch, mesh):
    ws = mesh["dp"].size() if mesh is not None else 1
    loss = ((model(batch["x"]) - batch["y"]) ** 2).mean() / ws
    loss.backward()
    if mesh is not None:
        for p in model.parameters():
            dist.all_reduce(p.grad, group=mesh["dp"].get_group())
        optimizer.param_groups[0]["lr"] = 0.1 * _n(model.w1.weight.grad)
    optimizer.step()
    optimizer.zero_grad()
    return loss
