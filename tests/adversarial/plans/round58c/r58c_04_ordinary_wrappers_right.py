"""Adversarial round 58c (false UNKNOWN probe): examples/torch/mlp_ddp.py with ordinary code
around it: a dataclass config held on the model, a subclass of a torch module class
(`nn.Linear`), a block wrapped by torch's activation-checkpoint wrapper (its module imported by
the train file). (An optimizer subclass of SGD is refused by the front end, rc 3: a stated
limit.) A right plan: must be EQUIVALENT."""
import dataclasses

import torch
import torch.distributed as dist
from torch import nn
from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import checkpoint_wrapper

MESH = {"dp": 2}
SIZES = {"batch": 8, "hidden": 6, "ffn": 10}


@dataclasses.dataclass
class Config:
    hidden: int
    ffn: int
    act: str = "silu"


class MyLinear(nn.Linear):
    def forward(self, x):
        return super().forward(x)


class Block(nn.Module):
    def __init__(self, h):
        super().__init__()
        self.lin = nn.Linear(h, h, bias=False)

    def forward(self, x):
        return torch.tanh(self.lin(x))


class MLP(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.cfg = cfg
        self.blk = checkpoint_wrapper(Block(cfg.hidden))
        self.w1 = MyLinear(cfg.hidden, cfg.ffn, bias=False)
        self.w2 = nn.Linear(cfg.ffn, cfg.hidden, bias=False)

    def forward(self, x):
        return self.w2(nn.functional.silu(self.w1(self.blk(x))))


def build_model(s):
    return MLP(Config(s["hidden"], s["ffn"]))


def make_batch(s):
    g = torch.Generator().manual_seed(0)
    return {"x": torch.randn(s["batch"], s["hidden"], generator=g),
            "y": torch.randn(s["batch"], s["hidden"], generator=g)}


def build_optimizer(model):
    return torch.optim.SGD(model.parameters(), lr=0.1)


def parallelize(model, mesh):
    return model


def train_step(model, optimizer, batch, mesh):
    loss = ((model(batch["x"]) - batch["y"]) ** 2).mean()
    loss.backward()
    if mesh is not None:
        for p in model.parameters():
            dist.all_reduce(p.grad, group=mesh["dp"].get_group())
            p.grad.div_(mesh["dp"].size())
    optimizer.step()
    optimizer.zero_grad()
    return loss
