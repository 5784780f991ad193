"""Idea: R43d-2 with one update per step (the usual step): the root's no_grad forward (a loss
log) between the backward and `optimizer.step()` leaves FSDP2's unsharded parameters
registered past the step; step 2's forward (`unshard` a no-op) runs on step 1's pre-update
parameters. One step is traced and the stand-in releases every held view when `train_step`
returns (`fsdp_hold.release_all`): the difference is in step 2 only (docs/torch.md, "Known
limits": what is registered after the step; stated there as a registration, not as numbers).
Truth: torch4_truth.py FILE 2 says right (5.6e-17 / 5.6e-17): it reads `model.state_dict()`
after every step, and FSDP2's state-dict pre-hook (`_register_state_dict_hooks`:
`to_sharded_hook`) reshards the held root, masking the staleness. Read once after step 2 only
(torch4_truth with the per-step read removed, a loop that does not checkpoint every step):
step 2 w1 7.8e-5 / w2 1.4e-4 (wrong).
Verdict (f7d58ae): EQUIVALENT (4 goals, 51 s): R43d-4, a false accept across steps.
"""
MESH = {"dp": 2}
import torch
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
    from torch.distributed.fsdp import fully_shard
    fully_shard(model.w2, mesh=mesh["dp"])
    fully_shard(model, mesh=mesh["dp"])     # the root: reshard_after_forward None -> False
    return model


def train_step(model, optimizer, batch, mesh):
    x, y = batch["x"], batch["y"]
    loss = ((model(x) - y) ** 2).mean()
    loss.backward()
    with torch.no_grad():                   # the loss once more, for the log
        logged = ((model(x) - y) ** 2).mean()
    optimizer.step()
    optimizer.zero_grad()
    return loss + 0.0 * logged
