"""Idea (round 48e): as r48e_04 but the hook halves mod.weight (FSDP2: the unsharded leaf, dropped at the reshard after the post-backward; serial: w1 itself): serial w1 halved, FSDP2 w1 not: wrong plan."""
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


H = []


def _fwd(mod, args, out):
    w = mod.weight

    def _h(p):
        with torch.no_grad():
            w.mul_(0.5)
    if not H:
        H.append(w.register_post_accumulate_grad_hook(_h))


def build_model(s):
    m = MLP(s["hidden"], s["ffn"])
    m.w1.register_forward_hook(_fwd)
    return m


def train_step(model, optimizer, batch, mesh):
    x, y = batch["x"], batch["y"]
    loss = ((model(x) - y) ** 2).mean()
    loss.backward()
    optimizer.step()
    optimizer.zero_grad()
    for h in H:
        h.remove()
    H.clear()
    return loss
