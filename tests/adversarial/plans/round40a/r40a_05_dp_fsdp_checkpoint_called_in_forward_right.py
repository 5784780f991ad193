"""Round 40a (dp 2, right): `torch.utils.checkpoint.checkpoint(self.inner, x,
use_reentrant=False)` called directly in the model's forward (as Hugging Face models'
`gradient_checkpointing_enable` does), no `CheckpointWrapper`; FSDP2 `fully_shard` on the root
only (`reshard_after_forward` is never applied to the root: its parameters stay gathered through
the backward). `_recompute_hooks` looks for torch's `CheckpointWrapper` only: the recomputation
in the backward reads the block's parameters outside the unit's forward.
Truth (torch4_truth.py FILE 2): step 1 5.6e-17 / 0; step 2 5.6e-17 / 5.6e-17 (right).
Verdict (main 05940a8): exit 3 (14 s), "aten.mm.default got mixed torch.Tensor and DTensor":
false refusal R40a-3.
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
        self.inner = Base(h, f)

    def forward(self, x):
        return torch.utils.checkpoint.checkpoint(self.inner, x, use_reentrant=False)


def build_model(s):
    return MLP(s["hidden"], s["ffn"])


def make_batch(s):
    g = torch.Generator().manual_seed(0)
    return {"x": torch.randn(s["batch"], s["hidden"], generator=g),
            "y": torch.randn(s["batch"], s["hidden"], generator=g)}


def build_optimizer(model):
    return torch.optim.SGD(model.parameters(), lr=0.1)


def parallelize(model, mesh):
    from torch.distributed.fsdp import fully_shard
    fully_shard(model, mesh=mesh["dp"])
    return model


def train_step(model, optimizer, batch, mesh):
    loss = ((model(batch["x"]) - batch["y"]) ** 2).mean()
    loss.backward()
    optimizer.step()
    optimizer.zero_grad()
    return loss
