"""Round 31, R31-2 (dp 2, FSDP2): t4_19 (the MLP under fully_shard, right,
EQUIVALENT, truth <= 2.8e-17) with the train file's own CPU kernel of
c10d::_reduce_scatter_base_ (torch.library, IMPL) registered at import: the output is the
rank's own chunk of the input, nothing reduced, and the Work handed back is an already-completed
one. FSDP2's collectives are modelled by the front end and the capture runs on meta / fake
tensors (the Meta kernel): this kernel runs only in the real run. Wrong: truth
(torch4_truth.py FILE 2) update w1 0.0067, w2 0.0080; step 2 0.0090 / 0.013. EQUIVALENT at
0f22574 (67 s)."""

import torch
import torch._C._distributed_c10d as c10d
import torch.distributed as dist

_LIB = torch.library.Library("c10d", "IMPL")


def _reduce_scatter_cpu(output, input, process_group, reduce_op, async_op=True, timeout=-1):
    n = input.numel() // output.numel()
    output.copy_(input.reshape(n, *output.shape)[dist.get_rank() % n])
    f = torch.futures.Future()
    f.set_result([output])
    return output, c10d._create_work_from_future(f).boxed()


_LIB.impl("_reduce_scatter_base_", _reduce_scatter_cpu, "CPU")


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
    return torch.optim.SGD(model.parameters(), lr=0.1)


def parallelize(model, mesh):
    dp = mesh["dp"]
    fully_shard(model.w1, mesh=dp)
    fully_shard(model.w2, mesh=dp)
    fully_shard(model, mesh=dp)
    return model


def train_step(model, optimizer, batch, mesh):
    loss = ((model(batch["x"]) - batch["y"]) ** 2).mean()
    loss.backward()
    optimizer.step()
    optimizer.zero_grad()
    return loss
