"""Round 33b (dp 2 x tp 3, right): hand-written DDP over dp (tp replicated) through views:
`gs = [p.grad.view(-1)]`, each all-reduced over `mesh["dp"]`, then
`torch._foreach_div_(gs, |dp|)` on the c10d op's returned tensors. A control for R32d-4's
fix on a mesh with |dp| != |tp|.
Truth (tests/adversarial/tp_truth.py FILE): <= 2.8e-17 on every rank.
prove --torch at f2928c8: EQUIVALENT (4 goals by rewriting, 148 s): right."""
MESH = {"dp": 2, "tp": 3}
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


def train_step(model, optimizer, batch, mesh):
    loss = ((model(batch["x"]) - batch["y"]) ** 2).mean()
    loss.backward()
    if mesh is not None:
        gs = [p.grad.view(-1) for p in model.parameters()]
        for g in gs:
            dist.all_reduce(g, group=mesh["dp"].get_group())
        torch._foreach_div_(gs, float(mesh["dp"].size()))
    optimizer.step()
    optimizer.zero_grad()
    return loss
