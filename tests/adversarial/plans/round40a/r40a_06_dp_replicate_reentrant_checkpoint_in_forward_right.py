"""Round 40a (dp 2, right): `torch.utils.checkpoint.checkpoint(self.inner, x,
use_reentrant=True)` called directly in the model's forward (no `CheckpointWrapper`), the model
under `replicate` (DDP). The reentrant recomputation runs the block again in the backward with
grad enabled and backpropagates through that recomputed graph; `_recompute_hooks` only knows
torch's `CheckpointWrapper`, so the recomputed forward reads the plain parameters, not the unit's
all-reducing views (as ac_reentrant_replicate_right before R39a-2's fix): the model's gradient
of the block skips DDP's all-reduce, the real one does not.
Truth (torch4_truth.py FILE 2): step 1 pre 2.8e-17, w1 0, w2 6.9e-18; step 2 2.8e-17 / 0 /
1.4e-17 (right).
Verdict (main 05940a8): NOT EQUIVALENT (6 goals, 4 refuted, 36 s): false refutation R40a-3.
"""
MESH = {"dp": 2}
import torch
import torch.distributed as dist
from torch import nn
import torch.utils.checkpoint

SIZES = {"batch": 8, "hidden": 6, "ffn": 10}


class Base(nn.Module):
    def __init__(self, h, f):
        super().__init__()
        self.w1 = nn.Linear(h, f, bias=False)
        self.w2 = nn.Linear(f, h, bias=False)

    def forward(self, x):
        return self.w2(nn.functional.silu(self.w1(x)))


class MLP(nn.Module):
    def __init__(self, h, f):
        super().__init__()
        self.pre = nn.Linear(h, h, bias=False)    # (reentrant: an input that needs grad)
        self.inner = Base(h, f)

    def forward(self, x):
        return torch.utils.checkpoint.checkpoint(self.inner, self.pre(x), use_reentrant=True)


def build_model(s):
    return MLP(s["hidden"], s["ffn"])


def make_batch(s):
    g = torch.Generator().manual_seed(0)
    return {"x": torch.randn(s["batch"], s["hidden"], generator=g),
            "y": torch.randn(s["batch"], s["hidden"], generator=g)}


def build_optimizer(model):
    return torch.optim.SGD(model.parameters(), lr=0.1)


def parallelize(model, mesh):
    from torch.distributed._composable.replicate import replicate
    replicate(model, device_mesh=mesh["dp"])
    return model


def train_step(model, optimizer, batch, mesh):
    loss = ((model(batch["x"]) - batch["y"]) ** 2).mean()
    loss.backward()
    optimizer.step()
    optimizer.zero_grad()
    return loss
