"""Round 35c (dp 2 x tp 2, wrong): R34e-3 on a ``dist.new_group`` group. Megatron's loop makes
the dp groups with ``new_group``; FSDP2 runs over ``DeviceMesh.from_group(dp_group, "cpu",
mesh_dim_names=("fsdp",))``. The step swaps the new group's cpu backend for tp's after the
forward (``_register_backend(cpu, UCC, tp backend)``) and puts the same object back
(``_register_backend(cpu, MPI, orig)``) in a hook on the output's gradient registered after
FSDP's: the real backward all-gather of ``w2`` (not recorded by the stand-in) runs over tp's
ranks. ``group_identity._registering`` records a swap on *world* groups only.
Truth (tp_truth): w1 0.0114, w2 2.8e-17 on every rank. Prove at 761d5b3: UNKNOWN (exit 2, 29 s),
an internal error "DimsError: input w1.weight: local dim 0 has size 22, its placement ('R',
'R') gives 44": FSDP2 over a from_group mesh is not modelled at all (R35c-4), so the swap is
not reached; not accepted."""

import torch
import torch.distributed as dist
from torch import nn
from torch.distributed.device_mesh import DeviceMesh
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


_G = {}


def parallelize(model, mesh):
    rank, ndp, ntp = dist.get_rank(), MESH["dp"], MESH["tp"]
    groups = [dist.new_group([i * ntp + j for i in range(ndp)]) for j in range(ntp)]
    _G["dp"] = groups[rank % ntp]
    dp = DeviceMesh.from_group(_G["dp"], "cpu", mesh_dim_names=("fsdp",))
    fully_shard(model.w1, mesh=dp)
    fully_shard(model.w2, mesh=dp)
    fully_shard(model, mesh=dp)
    return model


def train_step(model, optimizer, batch, mesh):
    pred = model(batch["x"])
    loss = ((pred - batch["y"]) ** 2).mean()
    if mesh is not None:
        cpu = torch.device("cpu")
        dpg, tpg = _G["dp"], mesh["tp"].get_group()
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
