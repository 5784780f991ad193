"""Round 41a (dp 2, wrong): nested checkpoint regions: an SAC region (``mm`` saved) inside a full
(non-selective) AC region; the block reads a global ``SCALE`` the step sets to 2 between the
forward and the backward, so both recomputations (the outer one's, then the inner one's) see the
new scale where the single-device step (no checkpointing) uses the forward's values. Gradients
averaged by hand.
Truth: step 1 w3 0.0042; step 2 w1 7.2e-05, w3 0.0051, w2 7.2e-05 (wrong).
Verdict (ec31448): NOT EQUIVALENT (143 s): sound.
"""
MESH = {"dp": 2}
import torch
from torch import nn
from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import checkpoint_wrapper
from torch.utils.checkpoint import CheckpointPolicy, create_selective_checkpoint_contexts

SIZES = {"batch": 8, "hidden": 6, "ffn": 10}
SCALE = [1.0]


class Base(nn.Module):
    def __init__(self, h, f):
        super().__init__()
        self.w1 = nn.Linear(h, f, bias=False)
        self.w3 = nn.Linear(f, f, bias=False)
        self.w2 = nn.Linear(f, h, bias=False)

    def forward(self, x):
        return self.w2(nn.functional.silu(self.w3(self.w1(x) * SCALE[0])))


class Mid(nn.Module):
    def __init__(self, h, f):
        super().__init__()
        self.base = Base(h, f)

    def forward(self, x):
        return self.base(x) * SCALE[0]


class MLP(nn.Module):
    def __init__(self, h, f):
        super().__init__()
        self.inner = Mid(h, f)

    def forward(self, x):
        return self.inner(x)


def build_model(s):
    return MLP(s["hidden"], s["ffn"])


def make_batch(s):
    g = torch.Generator().manual_seed(0)
    return {"x": torch.randn(s["batch"], s["hidden"], generator=g),
            "y": torch.randn(s["batch"], s["hidden"], generator=g)}


def build_optimizer(model):
    return torch.optim.SGD(model.parameters(), lr=0.1)


def policy(ctx, op, *args, **kwargs):
    if op is torch.ops.aten.mm.default:
        return CheckpointPolicy.MUST_SAVE
    return CheckpointPolicy.PREFER_RECOMPUTE


def parallelize(model, mesh):
    model.inner.base = checkpoint_wrapper(
        model.inner.base, context_fn=lambda: create_selective_checkpoint_contexts(policy))
    model.inner = checkpoint_wrapper(model.inner)
    return model


def train_step(model, optimizer, batch, mesh):
    ws = mesh["dp"].size() if mesh is not None else 1
    loss = ((model(batch["x"]) - batch["y"]) ** 2).mean() / ws
    SCALE[0] = 2.0
    loss.backward()
    SCALE[0] = 1.0
    if mesh is not None:
        for p in model.parameters():
            torch.distributed.all_reduce(p.grad, group=mesh["dp"].get_group())
    optimizer.step()
    optimizer.zero_grad()
    return loss
