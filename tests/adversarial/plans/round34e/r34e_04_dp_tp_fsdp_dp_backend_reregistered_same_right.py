"""Round 34e (dp 2 x tp 2, right): r34e_03's control. The same FSDP2 plan and the same
``_register_backend`` calls around forward and backward, but the backend registered during them
is the dp object's own (``orig``), so every collective runs over dp as modelled.
Truth (tp_truth): 2.8e-17. Prove at 402ba4c: EQUIVALENT (4 goals, 67 s)."""

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
        # right: its own backend object under another type
        dpg._register_backend(cpu, dist.ProcessGroup.BackendType.UCC, orig)
    loss = ((model(batch["x"]) - batch["y"]) ** 2).mean()
    loss.backward()
    if mesh is not None:
        dpg._register_backend(cpu, dist.ProcessGroup.BackendType.MPI, orig)   # the same object back
    optimizer.step()
    optimizer.zero_grad()
    return loss
