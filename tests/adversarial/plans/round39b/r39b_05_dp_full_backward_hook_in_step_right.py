"""Round 39b, false-refusal probe (dp 2, right). A full backward hook on the model
(``Module.register_full_backward_hook``, here a gradient-norm probe that changes nothing) is
registered in train_step and removed after the backward, in both steps; the gradient
all-reduce is written after the backward. The removal leaves ``_backward_hooks`` empty but
``_is_full_backward_hook = True`` on the module (with no hooks it runs nothing).
Truth (2 steps): 5.6e-17 / 0.0, 5.6e-17 / 5.6e-17 (right).
Verdict at a90b464: UNKNOWN (75 s), step-state "both steps change module
<model>._is_full_backward_hook (to builtins.bool:True)": R39b-3 (false refusal, minor)."""

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
    seen = []
    h = model.register_full_backward_hook(lambda m, gi, go: seen.append(len(go)))
    loss = ((model(batch["x"]) - batch["y"]) ** 2).mean()
    loss.backward()
    h.remove()
    if mesh is not None:
        for p in model.parameters():
            dist.all_reduce(p.grad, group=mesh["dp"].get_group())
            p.grad.div_(mesh["dp"].size())
    optimizer.step()
    optimizer.zero_grad()
    return loss
