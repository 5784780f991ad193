"""Round 36b (dp 2, wrong): rectangular gradients (ffn x hidden): the views are
`flat[a:b].view(p.shape[1], p.shape[0]).t()`: the right shape, the entries scrambled.
Truth (tests/adversarial/torch4_truth.py FILE 1), step 1: w1 0.0086 / w2 0.012 (wrong).
prove --torch (round 36b, main 0a8840e): **EQUIVALENT (37 s): false accept R36b-1**
(`buckets.piece_read` gives the `view` pass 1 refused, and the `t` of it, the written piece's
term)."""
MESH = {"dp": 2}
import torch
import torch.distributed as dist
from torch import nn

SIZES = {"batch": 8, "hidden": 6, "ffn": 10}


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
        a = 0
        for p in ps:
            p.grad = flat[a:a + p.numel()].view(p.shape[1], p.shape[0]).t()
            a += p.numel()
        dist.all_reduce(flat, group=mesh["dp"].get_group())
        flat.div_(mesh["dp"].size())
    optimizer.step()
    optimizer.zero_grad()
    return loss
