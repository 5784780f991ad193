"""Idea (round 48d): a forward pre-hook on w2 swaps the unsharded leaf with a fresh nn.Parameter clone (torch.utils.swap_tensors) at every call: real FSDP2 keeps the swapped object, no longer a view of the all-gather output, so step 2 computes with step 1s w2: wrong plan."""
MESH = {"dp": 2}
import torch
from torch import nn

SIZES = {"batch": 8, "hidden": 6, "ffn": 10}


class MLP(nn.Module):
    def __init__(self, h, f):
        super().__init__()
        self.w0 = nn.Linear(h, h, bias=False)
        self.w1 = nn.Linear(h, f, bias=False)
        self.w2 = nn.Linear(f, h, bias=False)

    def forward(self, x):
        return self.w2(nn.functional.silu(self.w1(torch.tanh(self.w0(x)))))


def make_batch(s):
    g = torch.Generator().manual_seed(0)
    return {"x": torch.randn(s["batch"], s["hidden"], generator=g),
            "y": torch.randn(s["batch"], s["hidden"], generator=g)}


def build_optimizer(model):
    return torch.optim.SGD(model.parameters(), lr=0.1)


def parallelize(model, mesh):
    from torch.distributed.fsdp import fully_shard
    fully_shard(model.w1, mesh=mesh["dp"])
    fully_shard(model.w2, mesh=mesh["dp"])
    fully_shard(model, mesh=mesh["dp"])
    return model

def _hook(mod, args):
    with torch.no_grad():
        torch.utils.swap_tensors(mod.weight, nn.Parameter(mod.weight.detach().clone()))


def build_model(s):
    m = MLP(s["hidden"], s["ffn"])
    m.w2.register_forward_pre_hook(_hook)
    return m


def train_step(model, optimizer, batch, mesh):
    x, y = batch["x"], batch["y"]
    loss = ((model(x) - y) ** 2).mean()
    loss.backward()
    optimizer.step()
    optimizer.zero_grad()
    return loss
