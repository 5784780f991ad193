"""Round 31, false-refusal probe (dp 2, right: truth 5.6e-17 / 0.0): the
gradient all-reduce issued from a post-accumulate-grad hook registered inside train_step
(DDP-style overlap, as docs/torch.md advises: "register it inside train_step") and removed
after backward. UNKNOWN at 0f22574 (73 s), step-state: "the parallel step changes parameter
w1.weight attributes (to <dict ...>) and the other does not" (the registration leaves
``_post_accumulate_grad_hooks = {}`` on the parameter; not from today's fixes, the op guard
passes it)."""

import torch
import torch.distributed as dist
from torch import nn

MESH = {"dp": 2}
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
    handles = []
    if mesh is not None:
        pg = mesh["dp"].get_group()

        def reduce(p):
            dist.all_reduce(p.grad, group=pg)
            p.grad.div_(mesh["dp"].size())

        handles = [p.register_post_accumulate_grad_hook(reduce) for p in model.parameters()]
    loss = ((model(batch["x"]) - batch["y"]) ** 2).mean()
    loss.backward()
    for h in handles:
        h.remove()
    optimizer.step()
    optimizer.zero_grad()
    return loss
