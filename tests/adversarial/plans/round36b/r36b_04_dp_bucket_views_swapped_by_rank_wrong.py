"""Round 36b (dp 2, wrong): square gradients (equal numels), the views' bounds swapped on rank 1
only (rank 1's w1 reads the averaged w2 gradient), views then all-reduce and `div_`.
Truth (tests/adversarial/torch4_truth.py FILE 1), step 1: w1 0.016 / w2 0.016 (wrong).
prove --torch (round 36b, main 0a8840e): UNKNOWN (32 s): rank-literal, the slice bound differs
across the ranks: sound."""
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
        flat = torch.cat([p.grad.view(-1) for p in ps])
        m = ps[0].numel()
        r = mesh["dp"].get_local_rank()
        lo = [0, m] if r == 0 else [m, 0]
        for p, a in zip(ps, lo):
            p.grad = flat[a:a + m].view_as(p)
        dist.all_reduce(flat, group=mesh["dp"].get_group())
        flat.div_(mesh["dp"].size())
    optimizer.step()
    optimizer.zero_grad()
    return loss
