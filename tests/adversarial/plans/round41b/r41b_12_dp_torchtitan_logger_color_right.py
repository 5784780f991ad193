"""Round 41b (dp 2, right): torchtitan's logging: `init_logger()` (root logger, INFO, a
StreamHandler() to sys.stderr with `[titan] %(asctime)s ...`), a `Color` dataclass of escape
strings, `logger.info(f"{color.red}step: {step:2} {color.green}loss:
{loss.item():7.4f}{color.reset}")` at the end of the step.
Truth (torch4_truth FILE 2): w1 5.6e-17, w2 0 after step 1 (5.6e-17 / 5.6e-17 after step 2):
right.
prove --torch at a323fd2: with a global step counter STEP: UNKNOWN (119 s, both steps change
STEP: the documented limit); with a local step: **UNKNOWN** (83 s) "the parallel step changes
the global Color ... (to <type ...>) and the other does not ... changed during train_step (line
64)": a false refusal (R41b-7). The logging statement itself passed the capture; without it (`_
= color.red`) the same UNKNOWN (86 s): the step-state check on a frozen dataclass class, not
log_calls.
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
from dataclasses import dataclass

logger = logging.getLogger()


def init_logger():
    logger.setLevel(logging.INFO)
    ch = logging.StreamHandler()
    ch.setLevel(logging.INFO)
    formatter = logging.Formatter("[titan] %(asctime)s - %(name)s - %(levelname)s - %(message)s")
    ch.setFormatter(formatter)
    logger.addHandler(ch)


@dataclass(frozen=True)
class Color:
    red = "\033[31m"
    green = "\033[32m"
    reset = "\033[39m"


init_logger()
color = Color()


def train_step(model, optimizer, batch, mesh):
    ws = mesh["dp"].size() if mesh is not None else 1
    loss = ((model(batch["x"]) - batch["y"]) ** 2).mean() / ws
    loss.backward()
    if mesh is not None:
        for p in model.parameters():
            dist.all_reduce(p.grad, group=mesh["dp"].get_group())
    optimizer.step()
    optimizer.zero_grad()
    step = 1                                # a local: a global counter is UNKNOWN (r41b_12)
    logger.info(
        f"{color.red}step: {step:2}  "
        f"{color.green}loss: {loss.item():7.4f}  {color.reset}"
    )
    return loss
