"""Round 33b (tp 2, right): the control of r33b_09: the same Megatron MLP (``w1``
ColwiseParallel, ``w2`` RowwiseParallel) and the same registry calls in the step, but the tp
group's name is re-registered to the tp group itself (a no-op).
Truth (tests/adversarial/tp_truth.py FILE): 2.8e-17 on every rank. prove --torch at f2928c8:
EQUIVALENT (5 goals by rewriting, 60 s): right."""
MESH = {"tp": 2}
import torch
import torch.distributed as dist
from torch import nn
from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module

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
    parallelize_module(model, mesh["tp"], {"w1": ColwiseParallel(), "w2": RowwiseParallel()})
    return model


def train_step(model, optimizer, batch, mesh):
    if mesh is not None:
        c10d = torch._C._distributed_c10d
        singles = [dist.new_group([r]) for r in range(mesh["tp"].size())]
        mine = singles[mesh.get_local_rank("tp")]
        tpg = mesh["tp"].get_group()
        name = tpg.group_name
        c10d._unregister_process_group(name)
        c10d._register_process_group(name, tpg)     # right: the name kept on the tp group
    loss = ((model(batch["x"]) - batch["y"]) ** 2).mean()
    loss.backward()
    optimizer.step()
    optimizer.zero_grad()
    if mesh is not None:        # the name given back to the tp group: no trace of it is left
        c10d._unregister_process_group(name)
        c10d._register_process_group(name, tpg)
    return loss
