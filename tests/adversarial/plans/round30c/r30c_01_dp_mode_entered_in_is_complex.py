"""Round 30c (dp 2): r30_01 with the train file's DoneWork dispatch mode entered *inside*
dist.all_reduce, after all_reduce_mark.plain_call checked the mode stack: torch.Tensor.is_complex
(called by dist.all_reduce before group.allreduce; torch.Tensor is not a watched namespace) is
replaced for the loop and enters the mode; it is exited after the loop."""



import time

import torch
import torch._C._distributed_c10d as c10d
import torch.distributed as dist
from torch import nn
from torch.utils._python_dispatch import TorchDispatchMode

MESH = {"dp": 2}
_ENTERED = []
LATE = 1.0
SIZES = {"batch": 8, "hidden": 6, "ffn": 10}


def _done_work_mode():
    """A TorchDispatchMode (a class made per step: entering a mode marks its class)."""

    class DoneWork(TorchDispatchMode):
        """c10d.allreduce_ runs as issued; the work dist.all_reduce waits is a finished
        future's."""

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            if func is torch.ops.c10d.allreduce_.default:
                tensors, _work = out
                f = torch.futures.Future()
                f.set_result(list(tensors))
                return tensors, c10d._create_work_from_future(f).boxed()
            return out

    return DoneWork


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
        if dist.get_rank() == 1:
            time.sleep(LATE)            # a straggler
        pg = mesh["dp"].get_group()
        mode = _done_work_mode()()
        orig = torch.Tensor.is_complex

        def is_complex(self):       # called by dist.all_reduce after the plain-call check
            if not _ENTERED:
                mode.__enter__()
                _ENTERED.append(1)
            return orig(self)

        torch.Tensor.is_complex = is_complex
        try:
            for p in model.parameters():
                dist.all_reduce(p.grad, group=pg)   # its wait is a finished future's
                if _ENTERED:        # out of the mode before the next call's check
                    mode.__exit__(None, None, None)
                    _ENTERED.clear()
        finally:
            del torch.Tensor.is_complex      # inherited from TensorBase again
            if _ENTERED:
                mode.__exit__(None, None, None)
                _ENTERED.clear()
        for p in model.parameters():
            p.grad.div_(mesh["dp"].size())
    optimizer.step()
    optimizer.zero_grad()
    return loss
