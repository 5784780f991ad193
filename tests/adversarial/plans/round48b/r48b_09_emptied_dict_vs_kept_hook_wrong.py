"""Idea (round 48b): step_state reads an emptied hook dict as none (R48a-3 fix): the serial step registers a post-accumulate-grad hook on w0.weight and removes it (an emptied dict), the plan keeps it (parallel only); the hook doubles w0's gradient when it fires in a later step. Expected: refused or not EQUIVALENT."""
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


def build_model(s):
    return MLP(s["hidden"], s["ffn"])


def parallelize(model, mesh):
    from torch.distributed.fsdp import fully_shard
    fully_shard(model.w1, mesh=mesh["dp"], reshard_after_forward=True)
    fully_shard(model.w2, mesh=mesh["dp"], reshard_after_forward=True)
    fully_shard(model, mesh=mesh["dp"])
    return model


def _double(p):
    p.grad.mul_(2.0)


def train_step(model, optimizer, batch, mesh):
    x, y = batch["x"], batch["y"]
    h = model.w0.weight.register_post_accumulate_grad_hook(_double)
    if mesh is None:
        h.remove()
    loss = ((model(x) - y) ** 2).mean()
    optimizer.zero_grad()
    if mesh is None:
        loss.backward()
    else:
        loss.backward()
    optimizer.step()
    optimizer.zero_grad()
    return loss
