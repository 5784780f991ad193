"""Round 38b (dp 2, right): false-refusal sweep of round 38's value_reads.TEXTS: a hand-written
DDP step that prints its local batch's shape, row count and numel (`print(f"...{tuple(x.shape)}
...")`), no values. If the capture's sizes are symbols (`SymInt`), their `__str__` / `__repr__`
are on TEXTS' list for any symbol.
Truth (torch4_truth.py FILE 1): w1 5.6e-17, w2 0 (right).
Verdict (wip/r38 ac0f305): EQUIVALENT (4 goals, 111 s): the shapes' text is allowed (no false
refusal).
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
    x = batch["x"]
    # right: a log line of shapes and sizes (no values)
    print(f"local batch {tuple(x.shape)}, {x.shape[0]} rows, {x.numel()} numbers, "
          f"grad shape {model.w1.weight.shape}")
    loss = ((model(x) - batch["y"]) ** 2).mean()
    loss.backward()
    if mesh is not None:
        group = mesh["dp"].get_group()
        for p in model.parameters():
            dist.all_reduce(p.grad, group=group)
            p.grad.div_(mesh["dp"].size())
    optimizer.step()
    optimizer.zero_grad()
    return loss
