"""Round 42b (review of `grad_snapshot`, stop 42). t4_19's MLP under FSDP2 (dp 2), AdamW; the
single-device side clips with ``torch.nn.utils.clip_grad_norm_(params, 100.0)`` (gradient goals
read before clipping), the parallel side clips by hand with the coefficient not clamped to 1
(read at ``optimizer.step()``, after its clip): the gradient goals are dropped (read apart). The
wrong gradients are scaled up to norm 100, which AdamW's first update nearly ignores
(scale-invariant up to eps) but its ``exp_avg`` / ``exp_avg_sq`` do not.

Truth (torch4_truth, 2 steps): update 1.7e-6 after step 1, 8.2e-4 after step 2 (wrong).
Verdict (49995e9): NOT EQUIVALENT at ``exp_avg_sq:w1.weight`` (13 s; the gradient goals
left out, the optimizer state refutes): sound.
"""

import torch
from torch import nn
from torch.distributed.fsdp import fully_shard

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
    return torch.optim.AdamW(model.parameters(), lr=0.01)


def parallelize(model, mesh):
    dp = mesh["dp"]
    fully_shard(model.w1, mesh=dp)
    fully_shard(model.w2, mesh=dp)
    fully_shard(model, mesh=dp)
    return model


def train_step(model, optimizer, batch, mesh):
    loss = ((model(batch["x"]) - batch["y"]) ** 2).mean()
    loss.backward()
    params = [p for p in model.parameters() if p.grad is not None]
    if mesh is None:
        torch.nn.utils.clip_grad_norm_(params, 100.0)      # (never active here)
    else:
        # "the same clip" by hand -- bug: the coefficient is not clamped to 1, so the
        # gradients are scaled *up* to norm 100 when their norm is below it
        norms = [torch.linalg.vector_norm(p.grad.full_tensor()) for p in params]
        coef = 100.0 / (torch.linalg.vector_norm(torch.stack(norms)) + 1e-6)
        with torch.no_grad():
            for p in params:
                p.grad.mul_(coef)
    optimizer.step()
    optimizer.zero_grad()
    return loss
