"""Round 33b (dp 2, wrong): the gradients all-reduced through views (`p.grad.view(-1)`), then
scaled by `torch._foreach_mul_` on the list of the views (the c10d op's returned tensors in
the trace); the loss is already divided by |dp|, so the doubling is wrong.
Truth (tests/adversarial/torch4_truth.py FILE 2): w1 0.0070, w2 0.0093 after step 1
(0.0086 / 0.012 after step 2). prove --torch at f2928c8: NOT EQUIVALENT (106 s, "= 2.000 x
spec: 2 = |dp|"): sound."""
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


def train_step(model, optimizer, batch, mesh):
    ws = mesh["dp"].size() if mesh is not None else 1
    loss = ((model(batch["x"]) - batch["y"]) ** 2).mean() / ws
    loss.backward()
    if mesh is not None:
        gs = [p.grad.view(-1) for p in model.parameters()]
        for g in gs:
            dist.all_reduce(g, group=mesh["dp"].get_group())
        torch._foreach_mul_(gs, 2.0)     # WRONG: the sum is already the mean
    optimizer.step()
    optimizer.zero_grad()
    return loss
