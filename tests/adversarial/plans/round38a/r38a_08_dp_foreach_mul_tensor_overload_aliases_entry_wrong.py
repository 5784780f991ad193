"""Round 38a (dp 2, wrong): R37b-3 through `_foreach_mul_.Tensor` (one tensor, not a list):
`torch._foreach_mul_([s.grad, w1.grad], s.grad)` with `s` a 0-dim parameter. The real CPU
foreach multiplies entry by entry: `s.grad` is squared first, then w1's gradient is multiplied
by the *new* `s.grad`. `written_twice` checks list arguments only (`isinstance(a, (list,
tuple))`); the spec multiplies by a clone taken before.
Truth (torch4_truth.py FILE 1): s 0.0, w1 0.00024, w2 1e-17 (wrong: w1's gradient times s.grad
squared).
Verdict (main 4d89de3): **EQUIVALENT** (6 goals, 50 s): false accept R38a-3.
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
        self.s = nn.Parameter(torch.tensor(0.9))

    def forward(self, x):
        return self.s * self.w2(nn.functional.silu(self.w1(x)))


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
    loss = ((model(batch["x"]) - batch["y"]) ** 2).mean()
    loss.backward()
    if mesh is None:
        c = model.s.grad.clone()
        torch._foreach_mul_([model.s.grad, model.w1.weight.grad], c)
    else:
        grads = [p.grad for p in model.parameters()]
        for g in grads:
            dist.all_reduce(g, group=mesh["dp"].get_group())
            g.div_(mesh["dp"].size())
        # WRONG: the scale aliases the list's first entry: w1's gradient gets s.grad ** 2
        torch._foreach_mul_([model.s.grad, model.w1.weight.grad], model.s.grad)
    optimizer.step()
    optimizer.zero_grad()
    return loss
