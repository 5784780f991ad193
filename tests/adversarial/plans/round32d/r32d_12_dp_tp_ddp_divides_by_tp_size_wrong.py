"""Round 32d, R32d-4's mutants (dp 2 x tp 3, wrong): r32d_07 dividing the dp all-reduced
gradient by the tp size (3) instead of the dp size (2): the gradient 2/3 of the mean (on dp 2
x tp 2 the two sizes agree and the plan is right).
Truth (tests/adversarial/tp_truth.py FILE): w1 0.0023, w2 0.0031 on every rank."""
MESH = {"dp": 2, "tp": 3}
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
        for p in model.parameters():
            dist.all_reduce(p.grad, group=mesh["dp"].get_group())
            p.grad.div_(mesh["tp"].size())   # WRONG: |tp| = 3, not |dp| = 2
    optimizer.step()
    optimizer.zero_grad()
    return loss
