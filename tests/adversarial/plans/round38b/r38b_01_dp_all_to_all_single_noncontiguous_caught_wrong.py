"""Round 38b (dp 2, wrong): R37a-2's family past backend_rejects: an all-to-all
(`dist.all_to_all_single`) of a non-contiguous input (`g.t()`, shapes right: dim 0 divides by
the group). gloo raises "Tensors must be contiguous" (ValueError, from C++, measured in a
one-rank gloo world); the fake backend does not, and `backend_rejects` checks only shapes,
dtypes and splits. Caught: skip the gradient all-reduce in the real run only.
Truth (torch4_truth.py FILE 1): w1 0.0088, w2 0.018 (wrong: gloo raised, caught; no all-reduce).
Verdict (wip/r38 ac0f305): UNKNOWN (2 goals, 109 s): `c10d.alltoall_base_` has no lowering rule
and its input is a view of the gradient, so the goals depending on it stay open: sound,
backend_rejects not reached (see r38b_05).
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


def _agree(g, group):
    # WRONG: gloo's all-to-all raises "Tensors must be contiguous" on a transposed input;
    # the fake backend takes it
    try:
        out = torch.empty(g.shape[1], g.shape[0], dtype=g.dtype)
        dist.all_to_all_single(out, g.t(), group=group)
        return True
    except (RuntimeError, ValueError):
        return False


def train_step(model, optimizer, batch, mesh):
    loss = ((model(batch["x"]) - batch["y"]) ** 2).mean()
    loss.backward()
    if mesh is not None:
        group = mesh["dp"].get_group()
        if _agree(model.w1.weight.grad, group):
            for p in model.parameters():
                dist.all_reduce(p.grad, group=group)
                p.grad.div_(mesh["dp"].size())
    optimizer.step()
    optimizer.zero_grad()
    return loss
