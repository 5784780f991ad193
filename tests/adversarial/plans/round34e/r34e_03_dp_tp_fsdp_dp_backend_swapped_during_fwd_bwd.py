"""Round 34e (dp 2 x tp 2, wrong): R34b-1 under FSDP2, swapped only while the modelled
collectives run. FSDP2 (``fully_shard`` on each linear and the root over ``mesh["dp"]``,
t4_19's MLP) keeps the dp group *object*; its all-gathers (forward) and reduce-scatters
(backward) dispatch to that object's cpu backend. The step replaces the dp object's cpu backend
by the tp group's (``_register_backend(cpu, UCC, tpg._get_backend(cpu))``) before the forward
and puts the very same backend object back after the backward
(``_register_backend(cpu, MPI, orig)``: a fresh backend type stores ``orig`` again for cpu). The
capture's stand-in FSDP records no collective for the unit (the prover models them), so
``backend_problem`` runs only when ``parallelize`` returns and when the step returns: both see
the world's backend objects.
Truth (tp_truth): w1 0.011 / w2 0.016 after one step. Prove at 402ba4c: exit 3 (25 s), the
stand-in's all_gather_into_tensor is recorded and checked (backend_problem): sound."""

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
    if mesh is not None:
        cpu = torch.device("cpu")
        dpg, tpg = mesh["dp"].get_group(), mesh["tp"].get_group()
        orig = dpg._get_backend(cpu)
        # WRONG: the dp object's collectives run on tp's backend during forward and backward
        dpg._register_backend(cpu, dist.ProcessGroup.BackendType.UCC, tpg._get_backend(cpu))
    loss = ((model(batch["x"]) - batch["y"]) ** 2).mean()
    loss.backward()
    if mesh is not None:
        dpg._register_backend(cpu, dist.ProcessGroup.BackendType.MPI, orig)   # the same object back
    optimizer.step()
    optimizer.zero_grad()
    return loss
