"""Round 41b (dp 2, right): `logging.basicConfig(level=INFO)` at import, `logger =
logging.getLogger(__name__)`, `logger.info(f"step {i} loss {loss.item():.3f}")` and
`logger.info("grad norm %.4f", norm.item())` (clip_grad_norm_) inside the step.
Truth (torch4_truth FILE 2): w1 5.6e-17, w2 0 after step 1 (5.6e-17 / 5.6e-17 after step 2):
right.
prove --torch at a323fd2: EQUIVALENT (4 goals, 91 s): right (R35d-5 / R35e-2 fixed for this
form).
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

import logging

logging.basicConfig(level=logging.INFO)
logger = logging.getLogger(__name__)


def train_step(model, optimizer, batch, mesh):
    ws = mesh["dp"].size() if mesh is not None else 1
    loss = ((model(batch["x"]) - batch["y"]) ** 2).mean() / ws
    loss.backward()
    if mesh is not None:
        for p in model.parameters():
            dist.all_reduce(p.grad, group=mesh["dp"].get_group())
    norm = torch.nn.utils.clip_grad_norm_(model.parameters(), 1e9)
    logger.info("grad norm %.4f", norm.item())
    optimizer.step()
    optimizer.zero_grad()
    i = 1                                   # a local: a global counter is UNKNOWN (r41b_12)
    logger.info(f"step {i} loss {loss.item():.3f}")
    return loss
