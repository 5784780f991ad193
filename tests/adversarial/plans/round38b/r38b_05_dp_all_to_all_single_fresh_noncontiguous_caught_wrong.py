"""Round 38b (dp 2, wrong): r38b_01 with the all-to-all's tensors fresh (`g.new_zeros(6, 10).t()`,
not a view of the gradient), so no goal depends on the collective: gloo raises "Tensors must be
contiguous" (ValueError from C++) on the non-contiguous input; the fake backend does not, and
`backend_rejects` checks only shapes, dtypes and splits. Caught: skip the gradient all-reduce
in the real run only.
Truth (torch4_truth.py FILE 1): w1 0.0088, w2 0.018 (wrong: gloo raised, caught; no all-reduce).
Verdict (wip/r38 ac0f305): **EQUIVALENT** (4 goals, 116 s): false accept R38b-3 (gloo's
contiguity check).
"""
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
    g = torch.Generator().manual_seed(0)
    return {"x": torch.randn(s["batch"], s["hidden"], generator=g),
            "y": torch.randn(s["batch"], s["hidden"], generator=g)}


def build_optimizer(model):
    return torch.optim.SGD(model.parameters(), lr=0.1)


def parallelize(model, mesh):
    return model


def _agree(g, group):
    # WRONG: gloo's all-to-all raises "Tensors must be contiguous" on a transposed input;
    # the fake backend takes it
    try:
        x = g.new_zeros(g.shape[1], g.shape[0]).t()
        out = g.new_empty(g.shape[0], g.shape[1])
        dist.all_to_all_single(out, x, group=group)
        return True
    except (RuntimeError, ValueError):
        return False


def train_step(model, optimizer, batch, mesh):
    loss = ((model(batch["x"]) - batch["y"]) ** 2).mean()
    loss.backward()
    if mesh is not None:
        group = mesh["dp"].get_group()
        if _agree(model.w1.weight.grad, group):
            for p in model.parameters():
                dist.all_reduce(p.grad, group=group)
                p.grad.div_(mesh["dp"].size())
    optimizer.step()
    optimizer.zero_grad()
    return loss
