"""Round 36 (dp 2, wrong): gradients as views of the bucket, each parameter given the *other* piece
(square, equal numels: both slices are pieces), then `flat.div_(n)`.
Truth (tests/adversarial/torch4_truth.py FILE 2), step 1: w1.weight 0.016 / w2.weight 0.016.
prove --torch (round 36, wip/bkt): NOT EQUIVALENT (58 s)."""
MESH = {"dp": 2}
import torch
import torch.distributed as dist
from torch import nn

SIZES = {"batch": 8, "hidden": 6}


class MLP(nn.Module):
    def __init__(self, h):
        super().__init__()
        self.w1 = nn.Linear(h, h, bias=False)
        self.w2 = nn.Linear(h, h, bias=False)

    def forward(self, x):
        return self.w2(nn.functional.silu(self.w1(x)))


def build_model(s):
    return MLP(s["hidden"])


def make_batch(s):
    return {"x": torch.zeros(s["batch"], s["hidden"]), "y": torch.zeros(s["batch"], s["hidden"])}


def build_optimizer(model):
    return torch.optim.SGD(model.parameters(), lr=0.1)


def parallelize(model, mesh):
    return model


def _unflatten(flat, ps):
    a = 0
    for p in ps:
        b = a + p.numel()
        p.grad.copy_(flat[a:b].view_as(p))
        a = b


def _views(flat, ps):
    a = 0
    for p in ps:
        b = a + p.numel()
        p.grad = flat[a:b].view_as(p)
        a = b


def train_step(model, optimizer, batch, mesh):
    loss = ((model(batch["x"]) - batch["y"]) ** 2).mean()
    loss.backward()
    if mesh is not None:
        ps = [model.w1.weight, model.w2.weight]
        flat = torch.cat([p.grad.view(-1) for p in ps])
        dist.all_reduce(flat, group=mesh["dp"].get_group())
        n1 = ps[0].numel()
        ps[0].grad = flat[n1:].view_as(ps[0])     # w2's piece as w1's gradient
        ps[1].grad = flat[:n1].view_as(ps[1])
        flat.div_(mesh["dp"].size())
    optimizer.step()
    optimizer.zero_grad()
    return loss
