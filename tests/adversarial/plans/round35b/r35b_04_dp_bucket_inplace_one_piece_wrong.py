"""Round 35b (dp 2, wrong): after the all-reduce, `flat[0:n1].mul_(2)` on w1's piece only
(not divided by dp), then every piece copied back: w1 gets twice its averaged gradient.
Truth (tests/adversarial/torch4_truth.py FILE 2): w1.weight 0.0126 after step 1 (w2 0).
prove --torch at 14ad0e4: UNKNOWN (39 s): aten.mul_ at the slice, "an in-place write through a
slice of a tensor that is read again" (lower._write_back): sound."""
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


def train_step(model, optimizer, batch, mesh):
    loss = ((model(batch["x"]) - batch["y"]) ** 2).mean()
    loss.backward()
    if mesh is not None:
        ps = [model.w1.weight, model.w2.weight]
        flat = torch.cat([p.grad.view(-1) for p in ps])
        dist.all_reduce(flat, group=mesh["dp"].get_group())
        flat.div_(mesh["dp"].size())
        flat[0:ps[0].numel()].mul_(2)
        _unflatten(flat, ps)
    optimizer.step()
    optimizer.zero_grad()
    return loss
