"""Round 35b (dp 2, wrong): the bucket's pieces are in the order [w2, w1] at the real sizes
(hidden 6) and [w1, w2] at the probe sizes, the flattened views taken in one order (only the
cat's argument list is reordered); the slices are copied back as [w1, w2]. Both
pieces are hidden x hidden, so every slice bound is piece k's at both sizes; at the real sizes
w1 gets w2's averaged gradient and w2 gets w1's.
Truth (tests/adversarial/torch4_truth.py FILE 2): w1.weight 0.0157, w2.weight 0.0157 after step 1.
prove --torch at 14ad0e4: refused, exit 3 (30 s): "argument 0[0] of cat (aten.cat.default) is
another value at the real sizes than at the probe sizes": sound."""
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
        gs = [p.grad.view(-1) for p in ps]
        flat = torch.cat(gs[::-1] if ps[0].shape[0] == 6 else gs)
        dist.all_reduce(flat, group=mesh["dp"].get_group())
        flat.div_(mesh["dp"].size())
        _unflatten(flat, ps)
    optimizer.step()
    optimizer.zero_grad()
    return loss
