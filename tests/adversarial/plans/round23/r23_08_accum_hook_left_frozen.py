"""Round 23 (R6-8's "left by the step" check bypassed through requires_grad): r6_17c (the
parallel step registers a gradient-doubling post-hook on every AccumulateGrad node at its end,
the nodes kept alive in the mutable default argument of a
function of the train file: a cache, where the step-state fingerprint does not look), with the parameters frozen between steps: both
steps unfreeze every parameter first and freeze them again before returning (build_model
returns them frozen, so requires_grad leaves the step as it entered). The leftover check counts
hooks with `accumulator_hooks`, which returns 0 for a parameter that does not require grad; for
real the node (weakly cached by the parameter, kept alive by that cache) survives the toggle, so
from step 2 on every gradient of the parallel step is doubled. Wrong (step 2 on)."""

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
    m = MLP(s["hidden"], s["ffn"])
    m.requires_grad_(False)             # frozen between steps
    return m


def make_batch(s):
    return {"x": torch.zeros(s["batch"], s["hidden"]), "y": torch.zeros(s["batch"], s["hidden"])}


def build_optimizer(model):
    return torch.optim.SGD(model.parameters(), lr=0.1)


def parallelize(model, mesh):
    return model


def _hook_the_accumulators(model):
    keep = []
    for p in model.parameters():
        acc = p.view_as(p).grad_fn.next_functions[0][0]
        acc.register_hook(_doubler(p))
        keep.append(acc)
    _cache(keep)


def train_step(model, optimizer, batch, mesh):
    model.requires_grad_(True)
    loss = ((model(batch["x"]) - batch["y"]) ** 2).mean()
    loss.backward()
    if mesh is not None:
        for p in model.parameters():
            dist.all_reduce(p.grad, group=mesh["dp"].get_group())
            p.grad.div_(mesh["dp"].size())
    optimizer.step()
    optimizer.zero_grad()
    if mesh is not None:
        _hook_the_accumulators(model)
    model.requires_grad_(False)
    return loss


def _cache(nodes, _bag=[]):  # noqa: B006 -- a module-level cache in a default argument
    _bag.append(nodes)


def _doubler(p):
    def hook(grad_inputs, grad_outputs):
        p.grad.mul_(2.0)
    return hook
