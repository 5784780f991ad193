"""Round 36b (dp 2, wrong): r36b_14 through `split_with_sizes`: the views are items of
`flat.split(numels)`, each `.view(p.shape[1], p.shape[0]).t()` (the getitem path of
`buckets.piece_read`), taken before the all-reduce and `div_`.
Truth (tests/adversarial/torch4_truth.py FILE 1), step 1: w1 0.0086 / w2 0.012 (wrong).
prove --torch (round 36b, main 0a8840e): **EQUIVALENT (25 s): false accept R36b-1** (the getitem
path of `buckets.piece_read`)."""
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
        for p, g in zip(ps, flat.split([p.numel() for p in ps])):
            p.grad = g.view(p.shape[1], p.shape[0]).t()
        dist.all_reduce(flat, group=mesh["dp"].get_group())
        flat.div_(mesh["dp"].size())
    optimizer.step()
    optimizer.zero_grad()
    return loss
