"""Round 40a (dp 2): r40a_09 under FSDP2 (`fully_shard` on the root) instead of `replicate`:
two backward passes over one forward (`retain_graph=True`, then a penalty's backward). The model
reduce-scatters the gathered parameters' gradient in both backwards.
Truth (torch4_truth.py FILE 2): step 1 and 2 w1 2.8e-17, w2 3.5e-18 (right).
Verdict (main 05940a8): EQUIVALENT (4 goals, 39 s): right.
"""
MESH = {"dp": 2}
import torch
import torch.distributed as dist
from torch import nn

SIZES = {"batch": 8, "hidden": 6, "ffn": 10}


class Base(nn.Module):
    def __init__(self, h, f):
        super().__init__()
        self.w1 = nn.Linear(h, f, bias=False)
        self.w2 = nn.Linear(f, h, bias=False)

    def forward(self, x):
        return self.w2(nn.functional.silu(self.w1(x)))


class MLP(nn.Module):
    def __init__(self, h, f):
        super().__init__()
        self.inner = Base(h, f)

    def forward(self, x):
        return self.inner(x)


def build_model(s):
    return MLP(s["hidden"], s["ffn"])


def make_batch(s):
    g = torch.Generator().manual_seed(0)
    return {"x": torch.randn(s["batch"], s["hidden"], generator=g),
            "y": torch.randn(s["batch"], s["hidden"], generator=g)}


def build_optimizer(model):
    return torch.optim.SGD(model.parameters(), lr=0.1)


def parallelize(model, mesh):
    from torch.distributed.fsdp import fully_shard
    fully_shard(model, mesh=mesh["dp"])
    return model


def train_step(model, optimizer, batch, mesh):
    out = model(batch["x"])
    loss = ((out - batch["y"]) ** 2).mean()
    loss.backward(retain_graph=True)
    (out.pow(2).mean() * 0.5).backward()
    optimizer.step()
    optimizer.zero_grad()
    return loss
