"""Round 38a (dp 2, wrong): R37b-3 through `.data`: `torch._foreach_div_(grads + [w1.grad.data],
ws)` names w1's gradient storage twice, once as its `.data` (a detached alias). The real
foreach divides it twice.
Truth (torch4_truth.py FILE 1): w1 0.0035, w2 0.0 (wrong: w1's gradient divided twice).
Verdict (main 4d89de3): UNKNOWN (39 s): `g.data` has `g`'s root, `written_twice`: sound.
"""
MESH = {"dp": 2}
import torch
import torch.distributed as dist
from torch import nn

SIZES = {"batch": 8, "hidden": 6, "ffn": 10}


class MLP(nn.Module):
    def __init__(self, h, f):
        super().__init__()
        self.w1 = nn.Linear(h, f, bias=False)
        self.w2 = nn.Linear(f, h, bias=False)

    def forward(self, x):
        return self.w2(nn.functional.silu(self.w1(x)))


def build_model(s):
    return MLP(s["hidden"], s["ffn"])


def make_batch(s):
    g = torch.Generator().manual_seed(0)
    return {"x": torch.randn(s["batch"], s["hidden"], generator=g),
            "y": torch.randn(s["batch"], s["hidden"], generator=g)}


def build_optimizer(model):
    return torch.optim.SGD(model.parameters(), lr=0.1)


def parallelize(model, mesh):
    return model


def train_step(model, optimizer, batch, mesh):
    loss = ((model(batch["x"]) - batch["y"]) ** 2).mean()
    loss.backward()
    if mesh is not None:
        grads = [p.grad for p in model.parameters()]
        for g in grads:
            dist.all_reduce(g, group=mesh["dp"].get_group())
        # WRONG: w1's gradient storage listed twice (its .data): divided twice in the real run
        torch._foreach_div_(grads + [grads[0].data], mesh["dp"].size())
    optimizer.step()
    optimizer.zero_grad()
    return loss
