"""Round 41d (dp 2, right; false-refusal check): the torchvision-references pattern
`setup_for_distributed` (also DETR, DeiT, MAE): `builtins.print` replaced at import by a
wrapper that prints on the master only, then `print(f"step loss {loss.item():.4f}")` in the
step. The callee is not the builtin print as found at import, so the call runs as written and
the placeholder refuses.
Truth: (torch4_truth FILE 2): right, w1 5.6e-17, w2 0 after step 1 (5.6e-17 / 5.6e-17 after step 2).
prove --torch at e62ea59: **exit 3** (20 s) "line 69: capturing the training step failed:
TypeError: line 69: a symbolic value of the step formatted for a call that is not a print to the
process's standard output": a false refusal (R41d-4).
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

import builtins


def setup_for_distributed(is_master):
    """torchvision references (classification/utils.py), DETR, DeiT, MAE: print on rank 0 only."""
    builtin_print = builtins.print

    def print(*args, **kwargs):
        force = kwargs.pop("force", False)
        if is_master or force:
            builtin_print(*args, **kwargs)

    builtins.print = print


setup_for_distributed(True)


def train_step(model, optimizer, batch, mesh):
    ws = mesh["dp"].size() if mesh is not None else 1
    loss = ((model(batch["x"]) - batch["y"]) ** 2).mean() / ws
    loss.backward()
    if mesh is not None:
        for p in model.parameters():
            dist.all_reduce(p.grad, group=mesh["dp"].get_group())
    print(f"step loss {loss.item():.4f}")
    optimizer.step()
    optimizer.zero_grad()
    return loss
