"""Round 41d (dp 2, right; false-refusal check): common loss prints in the step (both paths):
`print(f"step loss {loss.item():.3f}")`, `print("loss %.4f" % loss.item())`, `print(loss)`,
`print(f"{loss.item()}")`, `print("loss", loss.item(), sep="=", flush=True)`,
`print(f"{loss.item():7.4f}", file=sys.stderr)`.
Without `print(f"{loss}")`: at first it was in the list and exit 3 (15 s) at that line, "the
step reads a value of its fake tensors (t.__str__)": R41b-5, still open at e62ea59.
Truth: (torch4_truth FILE 2): right, w1 5.6e-17, w2 0 after step 1 (5.6e-17 / 5.6e-17 after step 2).
prove --torch at e62ea59: EQUIVALENT (4 goals, 77 s): sound.
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

import sys


def train_step(model, optimizer, batch, mesh):
    ws = mesh["dp"].size() if mesh is not None else 1
    loss = ((model(batch["x"]) - batch["y"]) ** 2).mean() / ws
    loss.backward()
    if mesh is not None:
        for p in model.parameters():
            dist.all_reduce(p.grad, group=mesh["dp"].get_group())
    print(f"step loss {loss.item():.3f}")
    print("loss %.4f" % loss.item())
    print(loss)
    print(f"{loss.item()}")
    print("loss", loss.item(), sep="=", flush=True)
    print(f"{loss.item():7.4f}", file=sys.stderr)
    optimizer.step()
    optimizer.zero_grad()
    return loss
