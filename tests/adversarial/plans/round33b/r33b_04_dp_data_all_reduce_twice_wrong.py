"""Round 33b (dp 2, wrong): all-reduce through `p.grad.data`, divide through `.data` again,
then a second all-reduce of the same (returned) tensor without a division: 2x the mean.
Truth (tests/adversarial/torch4_truth.py FILE 2): w1 0.0070, w2 0.0093 after step 1.
prove --torch at f2928c8: NOT EQUIVALENT (90 s): sound."""
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
    loss = ((model(batch["x"]) - batch["y"]) ** 2).mean()
    loss.backward()
    if mesh is not None:
        for p in model.parameters():
            g = p.grad.data
            dist.all_reduce(g, group=mesh["dp"].get_group())
            g.data.div_(mesh["dp"].size())
            dist.all_reduce(g, group=mesh["dp"].get_group())   # WRONG: a second sum
    optimizer.step()
    optimizer.zero_grad()
    return loss
