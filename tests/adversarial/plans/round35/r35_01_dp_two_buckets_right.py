"""Round 35 (dp 2, right): a bucketed hand-written DDP with two buckets (DDP's bucket_cap):
the weights' gradients in one flat buffer, the biases' in another, each all-reduced once
(`dist.all_reduce`, then the functional `funcol.all_reduce` + wait for the second), divided,
and copied back slice by slice.
Truth (tests/adversarial/torch4_truth.py FILE 2): <= 2.8e-17 (w1.bias 2.8e-17, the rest <=
1.4e-17). prove --torch: EQUIVALENT (16 s)."""
MESH = {"dp": 2}
import torch
import torch.distributed as dist
import torch.distributed._functional_collectives as funcol
from torch import nn

SIZES = {"batch": 8, "hidden": 6, "ffn": 10}


class MLP(nn.Module):
    def __init__(self, h, f):
        super().__init__()
        self.w1 = nn.Linear(h, f)
        self.w2 = nn.Linear(f, h)

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
        g = mesh["dp"].get_group()
        n = mesh["dp"].size()
        weights = [model.w1.weight, model.w2.weight]
        biases = [model.w1.bias, model.w2.bias]
        flat = torch.cat([p.grad.view(-1) for p in weights])
        dist.all_reduce(flat, group=g)
        flat.div_(n)
        _unflatten(flat, weights)
        flat_b = torch.cat([p.grad.reshape(-1) for p in biases])
        flat_b = funcol.all_reduce(flat_b, "sum", g)
        flat_b = funcol.wait_tensor(flat_b) * (1.0 / n)
        _unflatten(flat_b, biases)
    optimizer.step()
    optimizer.zero_grad()
    return loss
