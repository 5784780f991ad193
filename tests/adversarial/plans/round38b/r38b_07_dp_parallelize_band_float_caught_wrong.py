"""Round 38b (dp 2, wrong): R37a-2 (a collective gloo rejects, caught) moved out of the traced
step into `parallelize`: `dist.all_reduce(ReduceOp.BAND)` of a float tensor made from a
parameter (`new_ones(1)`: meta / fake in the capture, so `fake_answers` lets it pass).
`backend_rejects` checks the traced step's graphs only. Real run: gloo raises, caught,
`model.sync_grads = False`, no gradient all-reduce; capture: the all-reduce path.
Truth (torch4_truth.py FILE 1): w1 0.0088, w2 0.018 (wrong: gloo raised in parallelize, caught;
no all-reduce).
Verdict (wip/r38 ac0f305): **EQUIVALENT** (4 goals, 70 s): false accept R38b-4.
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
    # WRONG: an "agreement check" at setup: gloo has no BAND for a float tensor (raises);
    # the fake backend on the meta/fake parameters of the capture takes it. Caught: the
    # real run turns the gradient all-reduce off
    try:
        f = model.w1.weight.detach().new_ones(1)
        dist.all_reduce(f, op=dist.ReduceOp.BAND, group=mesh["dp"].get_group())
        model.sync_grads = True
    except RuntimeError:
        model.sync_grads = False
    return model


def train_step(model, optimizer, batch, mesh):
    loss = ((model(batch["x"]) - batch["y"]) ** 2).mean()
    loss.backward()
    if mesh is not None and model.sync_grads:
        group = mesh["dp"].get_group()
        for p in model.parameters():
            dist.all_reduce(p.grad, group=group)
            p.grad.div_(mesh["dp"].size())
    optimizer.step()
    optimizer.zero_grad()
    return loss
