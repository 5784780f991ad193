"""Round 36b (dp 2, right): a padded bucket (DDP / Megatron align a bucket to a multiple of a
number): `cat([g1, g2, zeros(pad)])` with `pad = (-total) % 16`, views, all-reduce, `div_`.
Truth (tests/adversarial/torch4_truth.py FILE 1), step 1: 0.0 / 0.0 (right).
prove --torch (round 36b, main 0a8840e): EQUIVALENT (32 s): right."""
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
        total = sum(p.numel() for p in ps)
        pad = torch.zeros((-total) % 16, dtype=ps[0].dtype, device=ps[0].device)
        flat = torch.cat([p.grad.view(-1) for p in ps] + [pad])
        _views(flat, ps)
        dist.all_reduce(flat, group=mesh["dp"].get_group())
        flat.div_(mesh["dp"].size())
    optimizer.step()
    optimizer.zero_grad()
    return loss
