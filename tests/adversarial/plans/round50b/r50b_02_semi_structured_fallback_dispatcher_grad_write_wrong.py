"""Round 50b: r49e_05 run by torch.sparse._semi_structured_ops.fallback_dispatcher(fn, ...), a torch helper that calls the callable it is handed under its own no_dispatch. Must not be EQUIVALENT."""
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
    return m


def train_step(model, optimizer, batch, mesh):
    x, y = batch["x"], batch["y"]
    loss = ((model(x) - y) ** 2).mean()
    loss.backward()
    with torch.no_grad():
        for p in model.parameters():
            g = p.grad
            if hasattr(g, "to_local"):
                loc = g.to_local()
                from torch.sparse._semi_structured_ops import fallback_dispatcher
                fallback_dispatcher(lambda t: t.mul_(2.0), None, (loc,), None)
    optimizer.step()
    optimizer.zero_grad()
    return loss
