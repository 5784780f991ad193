"""Round 37 (dp 2, wrong): the main_grad views are accumulated through slices whose bounds are the
pieces at the probe sizes only (at the real hidden size 6 they are swapped), while the
gradients are read back through the right slices: at the real sizes w1 gets w2's gradient."""
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


def _loss(model, x, y):
    return ((model(x) - y) ** 2).mean()


def train_step(model, optimizer, batch, mesh):
    loss = _loss(model, batch["x"], batch["y"])
    loss.backward()
    if mesh is not None:
        ps = [model.w1.weight, model.w2.weight]
        n = sum(p.numel() for p in ps)
        buf = torch.zeros(n, dtype=ps[0].dtype, device=ps[0].device)
        mains, a = [], 0
        for p in ps:
            mains.append(buf[a:a + p.numel()].view_as(p))
            a += p.numel()
        real = ps[0].shape[0] == 6            # the real hidden size only
        acc = [buf[n - ps[0].numel():].view_as(ps[0]), buf[:ps[1].numel()].view_as(ps[1])] \
            if real else mains
        for p, m in zip(ps, acc):
            m.add_(p.grad)
        dist.all_reduce(buf, group=mesh["dp"].get_group())
        buf.div_(mesh["dp"].size())
        a = 0
        for p in ps:
            p.grad = buf[a:a + p.numel()].view_as(p)
            a += p.numel()
    optimizer.step()
    optimizer.zero_grad()
    return loss
