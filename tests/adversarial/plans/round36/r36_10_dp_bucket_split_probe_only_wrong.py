"""Round 36 (dp 2, wrong): split sizes that are the pieces' numels at the probe sizes only: [n0,
n2, n1] at the real sizes (36, 6, 36: w2's gradient read 6 entries late, b2's from w2's), the
pieces swapped so that every view fits.
Truth (tests/adversarial/torch4_truth.py FILE 2), step 1: w2.weight 0.028 / w2.bias 0.023.
prove --torch (round 36, wip/bkt): exit 3 (18 s): "the program's dataflow differs at real sizes:
node copy__1 reads other values there" (the pieces swapped to fit the views are other nodes);
buckets._split's real-size check of the sizes is a second line."""
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
        ps = [model.w1.weight, model.w2.weight, model.w2.bias]
        flat = torch.cat([p.grad.view(-1) for p in ps])
        dist.all_reduce(flat, group=mesh["dp"].get_group())
        flat.div_(mesh["dp"].size())
        n0, n1, n2 = (p.numel() for p in ps)
        real = ps[0].shape[0] == 6            # the real hidden size only
        a, b, c = flat.split([n0, n2, n1] if real else [n0, n1, n2])
        x, y = (c, b) if real else (b, c)
        ps[0].grad.copy_(a.view_as(ps[0]))
        ps[1].grad.copy_(x.view_as(ps[1]))   # at the real sizes: w2's last 30 and b2
        ps[2].grad.copy_(y)                  # at the real sizes: w2's first 6
    optimizer.step()
    optimizer.zero_grad()
    return loss
