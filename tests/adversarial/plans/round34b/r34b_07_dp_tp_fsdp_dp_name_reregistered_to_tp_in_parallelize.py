"""Round 34b (dp 2 x tp 2, wrong): FSDP2 (`fully_shard` on each linear and the root, mesh
`mesh["dp"]`, t4_19's MLP) while c10d's registry maps the dp group's name to the tp group;
the name is given back at the end of `parallelize`. torch's FSDP2 resolves its process group
once, in `fully_shard` (`FSDPMeshInfo.shard_process_group = mesh.get_group(...)`): the real
all-gathers / reduce-scatters run over the tp group (the ranks holding the same block and the
same batch shard). The capture records `fully_shard` and resolves the unit's groups after
`parallelize` returned (`dataparallel.managed_params`), when the name is the dp group's again:
the modelled collectives are over dp, and the per-op check (R33b-2) sees the name resolve
to the dp object.
Truth (tests/adversarial/tp_truth.py FILE): w1 0.62, w2 0.61 on every rank after one step
(each tp pair gathers the same block twice).
prove --torch at cd4b4e4: **EQUIVALENT** (4 goals by rewriting, 85 s): R34b-4, a false accept.
Control: r34b_08 (the dp name re-registered to dp itself: truth 2.8e-17, EQUIVALENT 77 s)."""
import torch
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
    c10d = torch._C._distributed_c10d
    dp = mesh["dp"]
    name = dp.get_group().group_name
    dpg, tpg = dp.get_group(), mesh["tp"].get_group()
    c10d._unregister_process_group(name)
    c10d._register_process_group(name, tpg)     # WRONG while fully_shard resolves its group
    fully_shard(model.w1, mesh=dp)
    fully_shard(model.w2, mesh=dp)
    fully_shard(model, mesh=dp)
    c10d._unregister_process_group(name)
    c10d._register_process_group(name, dpg)     # given back before the step
    return model


def train_step(model, optimizer, batch, mesh):
    loss = ((model(batch["x"]) - batch["y"]) ** 2).mean()
    loss.backward()
    optimizer.step()
    optimizer.zero_grad()
    return loss
