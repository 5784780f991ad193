"""Round 41a (dp 2, right): selective AC whose policy saves every operator, around a block whose
inner ``Linear`` is its own FSDP2 unit (``fully_shard(block.w1)``: the unit's gather runs
*inside* the checkpointed region, in the forward and again in the recomputation, where SAC
replays its log by operator and call index). The capture's recomputation gather runs outside
SAC's modes (``outside_selective_checkpoint``) while its forward gather ran inside them: the
call indices of the gather's operators could fall out of step.
Truth: step 1 5.6e-17 / 0; step 2 5.6e-17 / 5.6e-17 (right).
Verdict (ec31448): EQUIVALENT (4 goals, 54 s): sound.
"""
MESH = {"dp": 2}
import torch
from torch import nn
from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import checkpoint_wrapper
from torch.utils.checkpoint import CheckpointPolicy, create_selective_checkpoint_contexts

SIZES = {"batch": 8, "hidden": 6, "ffn": 10}
SAVE_ALL = True


class Base(nn.Module):
    def __init__(self, h, f):
        super().__init__()
        self.w1 = nn.Linear(h, f, bias=False)
        self.w2 = nn.Linear(f, h, bias=False)

    def forward(self, x):
        return self.w2(nn.functional.silu(self.w1(x).view(-1, self.w1.out_features)))


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


def policy(ctx, op, *args, **kwargs):
    if SAVE_ALL or op is torch.ops.aten.mm.default:
        return CheckpointPolicy.MUST_SAVE
    return CheckpointPolicy.PREFER_RECOMPUTE


def context():
    return create_selective_checkpoint_contexts(policy)


def parallelize(model, mesh):
    from torch.distributed.fsdp import fully_shard
    fully_shard(model.inner.w1, mesh=mesh["dp"])
    model.inner = checkpoint_wrapper(model.inner, context_fn=context)
    fully_shard(model, mesh=mesh["dp"])
    return model


def train_step(model, optimizer, batch, mesh):
    loss = ((model(batch["x"]) - batch["y"]) ** 2).mean()
    loss.backward()
    optimizer.step()
    optimizer.zero_grad()
    return loss
