"""Round 35e (dp 2, right): r35d_06 with the logging module at INFO, lazy %-style:
`logging.getLogger("r35e_03").info("loss %.4f", loss.item())` (a handler configured at import). The
record is formatted in the handler's `emit`, which catches any error (`handleError`).
Truth (torch4_truth FILE 2): w1 0.0, w2 2.8e-17 (both steps): right.
prove --torch at 7e4c002: **exit 3** (16 s) "line 54: a Python value of the step's fake tensors was
asked for (... float(t.item()) ...); a step that catches the error takes another branch than the
real run (R35a-3) ...": a false refusal (R35e-2). logging's `emit` swallows the
GuardOnDataDependentSymNode (handleError prints it), 5c2a07c's record refuses; the message blames
a try/except the train file does not have.
"""
MESH = {"dp": 2}
import torch
import torch.distributed as dist
from torch import nn
from torch.distributed import distributed_c10d as c10d

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




import logging
import sys

_LOG = logging.getLogger("r35e_03")
_LOG.setLevel(logging.INFO)
_LOG.addHandler(logging.StreamHandler(sys.stdout))


def _log(loss):
    _LOG.info("loss %.4f", loss.item())


def train_step(model, optimizer, batch, mesh):
    ws = mesh["dp"].size() if mesh is not None else 1
    loss = ((model(batch["x"]) - batch["y"]) ** 2).mean() / ws
    loss.backward()
    if mesh is not None:
        for p in model.parameters():
            dist.all_reduce(p.grad, group=mesh["dp"].get_group())
    optimizer.step()
    optimizer.zero_grad()
    _log(loss)                                            # logging only: no effect on the step
    return loss
