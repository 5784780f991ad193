"""Round 38a (dp 2, wrong): an `out=` that aliases the op's input: `torch.mm(g, m, out=g)` (w1's
gradient times `m = w1^T w1`, (hidden, hidden)). Eager CPU zeroes `out` before the product (beta 0)
and reads the zeroed `g`: the gradient becomes 0, no error. The spec computes
`g.copy_(g @ m)`; the traced `mm.out` is `g_old @ m` written back into `g`.
Truth (torch4_truth.py FILE 1): w1 0.0031, w2 0.0 (wrong: w1's gradient 0 in the real run).
Verdict (main 4d89de3): UNKNOWN (66 s): "aten.mm.out ... no lowering rule": sound. First
versions: `m = torch.eye(...)` (device mismatch in the capture: exit 3, 18 s; then UNKNOWN,
32 s: `aten.eye` not lowered), `m = w2`'s weight (exit 3, 19 s: the capture's sizes differ).
"""
MESH = {"dp": 2}
import torch
import torch.distributed as dist
from torch import nn

SIZES = {"batch": 8, "hidden": 6, "ffn": 6}


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
    g = model.w1.weight.grad
    w = model.w1.weight.detach()
    m = w.t() @ w        # (hidden, hidden); first versions: torch.eye (not lowered), w2 (sizes)
    if mesh is None:
        g.copy_(g @ m)
    else:
        for p in model.parameters():
            dist.all_reduce(p.grad, group=mesh["dp"].get_group())
        # WRONG: out aliases the input: 0 in the real run
        torch.mm(g, m, out=g)
    optimizer.step()
    optimizer.zero_grad()
    return loss
