"""Idea (round 49a): after the backward the kept w2 reference's storage is freed for real; torch.empty(0).set_(that storage, 0, (6, 10), (10, 1)) (parallel only), never read. Expected out of bounds for a storage of size 0, but the real run accepts it (truth right 1.4e-17: the bounds check passes an empty storage): a right plan; exit 3 is a fake-tensor limit (NotImplementedError: argument of type UntypedStorage), not fsdp_freed."""
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

SEEN = []


def double(model):
    with torch.no_grad():
        for p in model.parameters():
            if p.grad is not None:
                p.grad.mul_(2.0)


def parallelize(model, mesh):
    from torch.distributed.fsdp import fully_shard
    fully_shard(model.w1, mesh=mesh["dp"])
    fully_shard(model.w2, mesh=mesh["dp"])
    fully_shard(model, mesh=mesh["dp"])
    return model


def build_model(s):
    m = MLP(s["hidden"], s["ffn"])
    m.w2.register_forward_hook(lambda mod, a, o: SEEN.append(mod.weight))
    return m


def train_step(model, optimizer, batch, mesh):
    x, y = batch["x"], batch["y"]
    loss = ((model(x) - y) ** 2).mean()
    loss.backward()
    w = SEEN[-1]
    SEEN.clear()
    if mesh is not None:
        t = torch.empty(0, dtype=w.dtype).set_(w.untyped_storage(), 0, tuple(w.shape), tuple(w.stride()))
        del t
    optimizer.step()
    optimizer.zero_grad()
    return loss
