"""Idea (round 48b): as r48b_04 but the leaf's _post_accumulate_grad_hooks dict is replaced (setattr) by one holding only a doubling hook under the stand-in hook's key: same count, same attribute set; real FSDP2 keeps the doubling hook for step 2."""
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
    m = MLP(s["hidden"], s["ffn"])
    m.w2.register_forward_hook(lambda mod, a, o: SEEN.append(mod.weight))
    return m


def parallelize(model, mesh):
    from torch.distributed.fsdp import fully_shard
    fully_shard(model.w1, mesh=mesh["dp"])
    fully_shard(model.w2, mesh=mesh["dp"])
    fully_shard(model, mesh=mesh["dp"])
    return model

SEEN = []


def _double(p):
    p.grad.mul_(2.0)


def train_step(model, optimizer, batch, mesh):
    x, y = batch["x"], batch["y"]
    loss = ((model(x) - y) ** 2).mean()
    loss.backward()
    optimizer.step()
    optimizer.zero_grad()
    w = SEEN[-1]
    SEEN.clear()
    if mesh is not None:
        d = getattr(w, "_post_accumulate_grad_hooks", None)
        if d:
            for k in list(d):
                d[k] = _double
        else:
            w.register_post_accumulate_grad_hook(_double)
    return loss
