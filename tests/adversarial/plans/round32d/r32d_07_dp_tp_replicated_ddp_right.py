"""Round 32d (dp 2 x tp 2, right): t02_corner_rank_2d without the corner's doubling: hand-written
DDP over dp (tp unused, replicated). A control for R32d-4 (the dp group of tp coordinate 1 is
another process group than the zero coordinate's, captured as a torchbind constant).
Truth (tests/adversarial/tp_truth.py FILE): 0.0 / 2.8e-17 on every rank. At 52ab29b: exit 3
(126 s) "rank {'dp': 0, 'tp': 1} at the real sizes: the captured constant _torchbind_obj0
differs from the zero coordinate's (a tensor built from the rank inside the step)": R32d-4,
a false refusal."""
MESH = {"dp": 2, "tp": 2}
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
            p.grad.div_(mesh["dp"].size())
    optimizer.step()
    optimizer.zero_grad()
    return loss
