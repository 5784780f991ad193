"""Round 35b (dp 2, right): DDP / apex's own helpers: `torch._utils._flatten_dense_tensors` of the
gradients, all-reduce, divide, `_unflatten_dense_tensors` and copy each back.
Truth (tests/adversarial/torch4_truth.py FILE 2): <= 2.8e-17.
prove --torch at 14ad0e4: EQUIVALENT (28 s): right."""
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
    from torch._utils import _flatten_dense_tensors, _unflatten_dense_tensors
    loss = ((model(batch["x"]) - batch["y"]) ** 2).mean()
    loss.backward()
    if mesh is not None:
        gs = [p.grad for p in (model.w1.weight, model.w2.weight)]
        flat = _flatten_dense_tensors(gs)
        dist.all_reduce(flat, group=mesh["dp"].get_group())
        flat.div_(mesh["dp"].size())
        for g, r in zip(gs, _unflatten_dense_tensors(flat, gs)):
            g.copy_(r)
    optimizer.step()
    optimizer.zero_grad()
    return loss
