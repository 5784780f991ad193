"""Selective activation checkpointing in ``parallelize`` (no FSDP2: the gradients averaged by
hand), and a global the block reads changed between the forward and the backward: the real run
recomputes the unsaved operators with the new value, the single-device step (no checkpointing)
uses the forward's: wrong. EQUIVALENT before stop 41 (under ``make_fx`` torch's SAC saved every
operator and recomputed none; ``eager_paths``).
Truth (tests/adversarial/torch4_truth.py, 2 steps): w1 / w2 / w3 0.00082 / 0.0065 /
0.0065, then 0.0013 / 0.0061 / 0.0063."""
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
        self.w2 = nn.Linear(f, h, bias=False)
        self.w3 = nn.Linear(f, f, bias=False)

    def forward(self, x):
        return self.w2(self.w3(nn.functional.silu(self.w1(x) * SCALE[0])))


class MLP(nn.Module):
    def __init__(self, h, f):
        super().__init__()
        self.inner = Base(h, f)

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


def op_sac_context():
    counts = {"forward": 0, "recompute": 0}

    def policy(ctx, op, *args, **kwargs):
        if op is torch.ops.aten.mm.default:
            side = "recompute" if ctx.is_recompute else "forward"
            counts[side] += 1
            if counts[side] % 2 == 1:
                return CheckpointPolicy.MUST_SAVE
        return CheckpointPolicy.PREFER_RECOMPUTE

    return create_selective_checkpoint_contexts(policy)


def parallelize(model, mesh):
    model.inner = checkpoint_wrapper(model.inner, context_fn=op_sac_context)
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
