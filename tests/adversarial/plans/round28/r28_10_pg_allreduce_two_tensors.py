"""Round 28 (dp only): mlp_ddp.py with both gradients summed in one call on the ProcessGroup
object, `pg.allreduce([g1, g2], opts).wait()` (synchronous, waited; the flattened gradients
have the same size, h * f). The c10d.allreduce_ rule lowers each tensor of the list as its own
ALL_REDUCE; gloo treats the list as one input per device and writes the sum over every tensor
and every rank into each (`gloo_allreduce_two_tensors.py`: a = b = 33, not 3 and 30). Wrong."""

import torch
import torch.distributed as dist
from torch import nn

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
    return model


def train_step(model, optimizer, batch, mesh):
    loss = ((model(batch["x"]) - batch["y"]) ** 2).mean()
    loss.backward()
    if mesh is not None:
        pg = mesh["dp"].get_group()
        opts = dist.AllreduceOptions()
        opts.reduceOp = dist.ReduceOp.SUM
        opts.asyncOp = False
        grads = [p.grad.view(-1) for p in model.parameters()]   # both h * f elements
        pg.allreduce(grads, opts).wait()                        # one call for all (BUG)
        for p in model.parameters():
            p.grad.div_(mesh["dp"].size())
    optimizer.step()
    optimizer.zero_grad()
    return loss
