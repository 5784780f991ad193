"""Idea (round 48a): a post-accumulate-grad hook registered (parallel only) on the unsharded leaf in the first iteration stays on FSDP2s single unsharded parameter object and fires again in the second iteration (after an optimizer step inside train_step); the stand-in gathers a new leaf then. Doubling when it fired twice: wrong for real."""
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
HANDLES = []
STATE = {"mesh": False}


def _fwd(mod, a, o):
    if STATE["mesh"] and not HANDLES:
        HANDLES.append(mod.weight.register_post_accumulate_grad_hook(lambda p: FIRED.append(1)))


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
    loss = ((model(x) - y) ** 2).mean()
    loss.backward()
    twice = len(FIRED) > 1
    FIRED.clear()
    for h in HANDLES:
        h.remove()
    HANDLES.clear()
    STATE["mesh"] = False
    if mesh is not None and twice:
        with torch.no_grad():
            for p in model.parameters():
                p.grad.mul_(2.0)
    optimizer.step()
    optimizer.zero_grad()
    return loss
