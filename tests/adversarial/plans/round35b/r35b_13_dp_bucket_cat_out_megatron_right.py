"""Round 35b (dp 2, right): a preallocated buffer written with `torch.cat(gs, out=buf)`,
all-reduced, divided and copied back slice by slice.
Truth (tests/adversarial/torch4_truth.py FILE 2): <= 2.8e-17.
prove --torch at 14ad0e4: UNKNOWN (15 s): aten.cat.out at line 53, no lowering rule: a false
refusal (R35b-3). (Written first with `torch.empty(N)` without `device=`: refused, exit 3, 14 s,
FakeTensorDeviceMismatchError meta / cpu: the capture runs on meta; a plan error.)"""
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
        buf = torch.empty(sum(p.numel() for p in ps), dtype=ps[0].dtype, device=ps[0].device)
        torch.cat([p.grad.view(-1) for p in ps], out=buf)
        dist.all_reduce(buf, group=mesh["dp"].get_group())
        buf.div_(mesh["dp"].size())
        _unflatten(buf, ps)
    optimizer.step()
    optimizer.zero_grad()
    return loss
