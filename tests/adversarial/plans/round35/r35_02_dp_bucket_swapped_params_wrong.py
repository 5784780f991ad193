"""Round 35 (dp 2, wrong): a flat bucket whose slices are copied back to the wrong parameters:
w1 and w2 are both hidden x hidden, so w1 gets w2's averaged gradient and w2 gets w1's.
Truth (tests/adversarial/torch4_truth.py FILE 2): w1.weight 0.0146, w2.weight 0.0146 after step
1. prove --torch: NOT EQUIVALENT (60 s, plan values differ)."""
MESH = {"dp": 2}
import torch
import torch.distributed as dist
from torch import nn

SIZES = {"batch": 8, "hidden": 6}


class MLP(nn.Module):
    def __init__(self, h):
        super().__init__()
        self.w1 = nn.Linear(h, h, bias=False)
        self.w2 = nn.Linear(h, h)

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


def train_step(model, optimizer, batch, mesh):
    loss = ((model(batch["x"]) - batch["y"]) ** 2).mean()
    loss.backward()
    if mesh is not None:
        ps = [model.w1.weight, model.w2.weight, model.w2.bias]
        flat = torch.cat([p.grad.view(-1) for p in ps])
        dist.all_reduce(flat, group=mesh["dp"].get_group())
        flat.div_(mesh["dp"].size())
        k = ps[0].numel()
        ps[1].grad.copy_(flat[:k].view_as(ps[1]))          # w1s slice into w2
        ps[0].grad.copy_(flat[k:2 * k].view_as(ps[0]))     # w2s slice into w1
        ps[2].grad.copy_(flat[2 * k:].view_as(ps[2]))
    optimizer.step()
    optimizer.zero_grad()
    return loss
