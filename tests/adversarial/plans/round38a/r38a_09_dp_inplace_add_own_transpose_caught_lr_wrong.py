"""Round 38a (dp 2, wrong): an in-place op whose input overlaps its output, caught:
`g.add_(g.t())` of a square gradient raises in eager ("some elements of the input tensor and the
written-to tensor refer to a single memory location") before writing; traced on fake tensors
(make_fx) it does not raise. In a `try`, the capture takes the branch that adds and subtracts
back (`lr` 0.1, the spec's), the real run the fallback (`lr` 0.2).
Truth (torch4_truth.py FILE 1): w1 0.0126, w2 0.0053 (wrong: lr 0.2 in the real run).
Verdict (main 4d89de3): exit 3 (56 s): "the graph at real sizes has 48 nodes, the main trace 47"
(the real-size trace raised and took the fallback): sound.
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
    if mesh is not None:
        for p in model.parameters():
            dist.all_reduce(p.grad, group=mesh["dp"].get_group())
        g = model.w1.weight.grad
        gt = g.t().clone()
        # WRONG: raises in the real run only (input overlaps output), caught
        try:
            g.add_(g.t())
            g.sub_(gt)
            n = 1.0
        except RuntimeError:
            n = 2.0
        optimizer.param_groups[0]["lr"] = 0.1 * n
    optimizer.step()
    optimizer.zero_grad()
    return loss
