"""Round 36b (dp 2, right): Megatron's contiguous grad buffer as Megatron writes it: a zeroed
buffer, `main_grad` views of it made first, each gradient added into its view (`add_`, Megatron's
backward hook), then the all-reduce and `div_` of the buffer, `p.grad = p.main_grad`.
Truth (tests/adversarial/torch4_truth.py FILE 1), step 1: 0.0 / 0.0 (right).
prove --torch (round 36b, main 0a8840e): UNKNOWN (29 s): `aten.add_` into a `main_grad` view, a
write through a slice: false refusal R36b-3."""
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
        n = sum(p.numel() for p in ps)
        buf = torch.zeros(n, dtype=ps[0].dtype, device=ps[0].device)
        mains, a = [], 0
        for p in ps:
            mains.append(buf[a:a + p.numel()].view_as(p))
            a += p.numel()
        for p, m in zip(ps, mains):
            m.add_(p.grad)
        dist.all_reduce(buf, group=mesh["dp"].get_group())
        buf.div_(mesh["dp"].size())
        for p, m in zip(ps, mains):
            p.grad = m
    optimizer.step()
    optimizer.zero_grad()
    return loss
