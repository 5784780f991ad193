"""Round 34b (tp 2, wrong): torch's own TP (Megatron MLP, `w1` ColwiseParallel, `w2`
RowwiseParallel); in the step the world's tp group object gets the cpu backend of a group of
the rank alone (`ProcessGroup._register_backend(cpu, BackendType.UCC, single._get_backend(cpu))`),
given back at the end of the step (`_register_backend(cpu, BackendType.MPI, own)`). DTensor's
all-reduce of RowwiseParallel's partial sums carries the tp name, which resolves to the tp
object (the check of R33b-2 holds), whose backend sums over the rank alone.
Truth (tests/adversarial/tp_truth.py FILE): w1 0.0030, w2 0.0029 on every rank after one step
(as r33b_09).
prove --torch at cd4b4e4: **EQUIVALENT** (5 goals by rewriting, 51 s): R34b-1 against torch's
own TP, a false accept."""
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
        singles = [dist.new_group([r]) for r in range(mesh["tp"].size())]
        mine = singles[mesh.get_local_rank("tp")]
        tpg = mesh["tp"].get_group()
        cpu = torch.device("cpu")
        own = tpg._get_backend(cpu)
        # WRONG: the tp group object's cpu backend becomes a group of the rank alone
        tpg._register_backend(cpu, dist.ProcessGroup.BackendType.UCC, mine._get_backend(cpu))
    loss = ((model(batch["x"]) - batch["y"]) ** 2).mean()
    loss.backward()
    optimizer.step()
    optimizer.zero_grad()
    if mesh is not None:        # the tp backend given back: nothing of it is left
        tpg._register_backend(cpu, dist.ProcessGroup.BackendType.MPI, own)
    return loss
