"""Round 3, torch: hand-written DDP on dp=4 where the *last* rank (a remainder / last-rank
special case) contributes twice its gradient before the all-reduce. Wrong: every gradient is
(g0 + g1 + g2 + 2 g3) / 4 instead of (g0 + g1 + g2 + g3) / 4. Only ranks 0, 1, 2 are traced
(spec_lang/torch_frontend/frontend.py rank_coords)."""
MESH = {"dp": 4}
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
    return {"x": torch.zeros(s["batch"], s["hidden"]), "y": torch.zeros(s["batch"], s["hidden"])}


def build_optimizer(model):
    return torch.optim.SGD(model.parameters(), lr=0.1)


def parallelize(model, mesh):
    return model


def train_step(model, optimizer, batch, mesh):
    loss = ((model(batch["x"]) - batch["y"]) ** 2).mean()
    loss.backward()
    if mesh is not None:
        last = dist.get_rank() == mesh["dp"].size() - 1
        for p in model.parameters():
            if last:
                p.grad.mul_(2.0)
            dist.all_reduce(p.grad, group=mesh["dp"].get_group())
            p.grad.div_(mesh["dp"].size())
    optimizer.step()
    optimizer.zero_grad()
    return loss
