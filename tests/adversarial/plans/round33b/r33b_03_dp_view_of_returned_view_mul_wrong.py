"""Round 33b (dp 2, wrong): a view of a view of the all-reduced view: `g = p.grad.view(-1)`,
all-reduced, then `g.view(p.shape).t().mul_(2.0)` (transpose of a reshape of the c10d op's
returned tensor); the loss already divided by |dp|.
Truth (tests/adversarial/torch4_truth.py FILE 2): w1 0.0070, w2 0.0093 after step 1.
prove --torch at f2928c8: NOT EQUIVALENT (68 s, "= 2.000 x spec"): sound."""
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
            g.view(p.shape).t().mul_(2.0)     # WRONG
    optimizer.step()
    optimizer.zero_grad()
    return loss
