"""Round 34, attempt a4: R33-2 on the spec side. The single-device spec (``mesh is None``)
post-processes its gradients with ``g - g.mean(d) + g.mean(0)``, ``d`` 0 at the probe sizes (the
gradient itself) and 1 when the gradients are square at the real sizes; the plan does not (the
probe programs agree, the real ones differ). Truth (torch4_truth, dp 2): step 1 w1 0.0030 / w2
0.0019, step 2 0.0038 / 0.0020. Prove at 26b88f4: UNKNOWN (59 s), "argument 1[0] of mean_1
(aten.mean.dim) is 0 at the probe sizes and 1 at the real sizes": sound (the spec's traces are
checked as the plan's)."""

import torch
import torch.distributed as dist
from torch import nn

MESH = {"dp": 2}
SIZES = {"batch": 8, "hidden": 6, "ffn": 6}


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
    if mesh is None:     # the single-device spec post-processes its gradients
        with torch.no_grad():
            for p in model.parameters():
                g = p.grad
                d = 1 if g.shape[0] == g.shape[1] else 0    # 1 at the real sizes only
                p.grad.copy_(g - g.mean(d) + g.mean(0))
    if mesh is not None:
        for p in model.parameters():
            dist.all_reduce(p.grad, group=mesh["dp"].get_group())
            p.grad.div_(mesh["dp"].size())
            p.grad.copy_(p.grad.clone())
    optimizer.step()
    optimizer.zero_grad()
    return loss
