"""Round 34e (dp 2 x tp 2, wrong): r34e_03 timed between the modelled collectives. FSDP2
(``fully_shard`` on each linear and the root over ``mesh["dp"]``) reshards ``w2`` after the
forward and all-gathers it again in the backward (its pre-backward hook on the output), a
collective the capture's stand-in does not record (``GatherShard.backward`` only
reduce-scatters). The step swaps the dp object's cpu backend for tp's after the forward and
puts the very same backend object back in a hook on the output's gradient, registered after
FSDP's own (hooks run in registration order): the real backward all-gather of ``w2`` runs
over tp's ranks, its reduce-scatter (and the stand-in's, where ``backend_problem`` runs) over
dp again.
Truth (tp_truth): w1 0.0114 on every rank after one step, w2 2.8e-17 (w2's gathered copy is
wrong in the backward only, so w1's gradient is). Prove at 402ba4c: **EQUIVALENT** (4 goals, 99 s):
finding R34e-3, a false accept."""

import torch
import torch.distributed as dist
from torch import nn
from torch.distributed.fsdp import fully_shard

MESH = {"dp": 2, "tp": 2}
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
    return torch.optim.SGD(model.parameters(), lr=0.1)


def parallelize(model, mesh):
    dp = mesh["dp"]
    fully_shard(model.w1, mesh=dp)
    fully_shard(model.w2, mesh=dp)
    fully_shard(model, mesh=dp)
    return model


def train_step(model, optimizer, batch, mesh):
    pred = model(batch["x"])
    loss = ((pred - batch["y"]) ** 2).mean()
    if mesh is not None:
        cpu = torch.device("cpu")
        dpg, tpg = mesh["dp"].get_group(), mesh["tp"].get_group()
        orig = dpg._get_backend(cpu)
        # WRONG: the dp object's collectives run on tp's backend from here ...
        dpg._register_backend(cpu, dist.ProcessGroup.BackendType.UCC, tpg._get_backend(cpu))

        def back(g):      # ... until after FSDP's pre-backward all-gather of w2
            dpg._register_backend(cpu, dist.ProcessGroup.BackendType.MPI, orig)
        pred.register_hook(back)
    loss.backward()
    optimizer.step()
    optimizer.zero_grad()
    return loss
