"""Round 32d, R32d-4's cause on a one-axis mesh (dp 2, wrong): the gradient all-reduced through
a view ``g = p.grad.view(-1)``, then scaled in place through ``g`` (``g.mul_(2.0)``). The
local loss is already divided by |dp|, so the all-reduced sum is the mean gradient and the
extra ``mul_`` doubles it. ``dist.all_reduce(g)`` points ``g`` at the c10d op's returned
tensor (``getitem(getitem(allreduce_, 0), 0)``), which ``lower._storage_roots`` made its own
storage root: the ``mul_`` never reached ``p.grad`` (a false accept before the fix, the same
mis-model that refuted r32d_06 by 2x; spec_lang/torch_frontend/aliasing.py).
Truth (tests/adversarial/torch4_truth.py FILE 2): w1 0.0070, w2 0.0093 after one step."""
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
    return {"x": torch.zeros(s["batch"], s["hidden"]), "y": torch.zeros(s["batch"], s["hidden"])}


def build_optimizer(model):
    return torch.optim.SGD(model.parameters(), lr=0.1)


def parallelize(model, mesh):
    return model


def train_step(model, optimizer, batch, mesh):
    ws = mesh["dp"].size() if mesh is not None else 1
    loss = ((model(batch["x"]) - batch["y"]) ** 2).mean() / ws
    loss.backward()
    if mesh is not None:
        for p in model.parameters():
            g = p.grad.view(-1)
            dist.all_reduce(g, group=mesh["dp"].get_group())
            g.mul_(2.0)     # WRONG: the sum is already the mean
    optimizer.step()
    optimizer.zero_grad()
    return loss
