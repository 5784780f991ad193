"""Round 37a (dp 2, wrong): R37a-2 (an error gloo raises and the fake backend does not,
caught) through an idiom: nccl's fused average `all_reduce(g, op=dist._make_nccl_premul_sum(1 /
ws))` with a fallback for other backends that forgets to divide. gloo raises "Cannot use
ReduceOp.PREMUL_SUM with Gloo" (measured in a one-rank gloo world); the fake backend takes it.
Truth (torch4_truth.py FILE 1): w1 0.0070, w2 0.0093 (wrong: gloo raised, the fallback summed
without dividing).
Verdict at faf97b6: UNKNOWN (62 s): sound ("all_reduce with ReduceOp 8" has no lowering rule;
the capture's path is the premul one, which the lowering does not follow).
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


def _average(g, group, ws):
    # nccl's fused average (the factor applied before the sum, as FSDP does on nccl); the
    # fallback for a backend without PREMUL_SUM forgets the divide: WRONG, but gloo raises
    # "Cannot use ReduceOp.PREMUL_SUM with Gloo" in the real run only
    try:
        dist.all_reduce(g, op=dist._make_nccl_premul_sum(1.0 / ws), group=group)
    except RuntimeError:
        dist.all_reduce(g, group=group)


def train_step(model, optimizer, batch, mesh):
    loss = ((model(batch["x"]) - batch["y"]) ** 2).mean()
    loss.backward()
    if mesh is not None:
        group = mesh["dp"].get_group()
        for p in model.parameters():
            _average(p.grad, group, mesh["dp"].size())
    optimizer.step()
    optimizer.zero_grad()
    return loss
