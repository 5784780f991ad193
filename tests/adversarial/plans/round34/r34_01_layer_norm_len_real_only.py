"""Round 34, attempt a1: a layer norm's ``normalized_shape`` (exempt: ``SHAPE_SIZE_ARGS``) of
another length at the real sizes: ``g - layer_norm(g, g.shape[2 - k:]) + layer_norm(g,
g.shape[1:])``, ``k`` 1 at the probe sizes (the gradient itself) and 2 when the gradients are
square at the real sizes (``hidden == ffn == 6``). ``_literal_differences`` reports the list of
another length whole (key 1), which ``_same_meaning`` exempts; but the mean / rstd outputs are
``(H, 1)`` and ``(1, 1)``: ``solve_real_sizes`` refuses. Truth (torch4_truth, dp 2): step 1 w1
0.100 / w2 0.094, step 2 0.152 / 0.148. Prove at 26b88f4: exit 3 (27 s), "the real shape has 1
where the named dims ['ffn'] give 6": sound. Control r34_02 (truth 5.6e-17): EQUIVALENT (88 s)."""

import torch
import torch.distributed as dist
from torch import nn

MESH = {"dp": 2}
SIZES = {"batch": 8, "hidden": 6, "ffn": 6}


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
        for p in model.parameters():
            dist.all_reduce(p.grad, group=mesh["dp"].get_group())
            p.grad.div_(mesh["dp"].size())
            g = p.grad
            k = 2 if g.shape[0] == g.shape[1] else 1     # 2 at the real sizes only
            b = g - nn.functional.layer_norm(g, tuple(g.shape[2 - k:])) \
                + nn.functional.layer_norm(g, tuple(g.shape[1:]))
            p.grad.copy_(b.clone())
    optimizer.step()
    optimizer.zero_grad()
    return loss
