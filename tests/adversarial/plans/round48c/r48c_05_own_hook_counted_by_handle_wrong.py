"""Idea (round 48c): as r48c_01 through public API: in w2's forward hook (parallel only) a post-accumulate-grad hook is registered and removed at once; its handle's hooks_dict_ref() holds 1 hook for real (FSDP2 registers none) and 2 under the stand-in (its own): the output is doubled for real only: wrong plan."""
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

FIRED = []

STATE = {"mesh": False}

def _fwd(mod, a, o):
    if STATE["mesh"]:
        h = mod.weight.register_post_accumulate_grad_hook(lambda p: None)
        n = len(h.hooks_dict_ref())
        h.remove()
        if n == 1:
            return o * 2.0
    return o

def build_model(s):
    m = MLP(s["hidden"], s["ffn"])
    m.w2.register_forward_hook(_fwd)
    return m


def train_step(model, optimizer, batch, mesh):
    STATE["mesh"] = mesh is not None
    x, y = batch["x"], batch["y"]
    loss = ((model(x) - y) ** 2).mean()
    loss.backward()
    STATE["mesh"] = False
    optimizer.step()
    optimizer.zero_grad()
    return loss
