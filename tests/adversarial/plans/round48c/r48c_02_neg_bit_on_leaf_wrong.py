"""Idea (round 48c): left_over reads the leaf'\''s .grad, hooks, class and __dict__, not its C flags: at the end of the step (parallel only) the leaf kept from w2'\''s forward gets the negative bit (torch._C._set_neg). FSDP2'\''s one unsharded parameter keeps it, so step 2'\''s forward reads -W2: wrong for real."""
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

LEAF = []


def _fwd(mod, a, o):
    if STATE["mesh"] and not LEAF:
        LEAF.append(mod.weight)
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
    optimizer.step()
    optimizer.zero_grad()
    for w in LEAF:
        torch._C._set_neg(w, True)
    LEAF.clear()
    STATE["mesh"] = False
    return loss
