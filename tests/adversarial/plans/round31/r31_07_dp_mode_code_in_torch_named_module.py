"""Round 31 (dp 2): r30c_01 (DoneWork dispatch mode entered inside
dist.all_reduce by a replaced torch.Tensor.is_complex, exited after each call) with the mode's
code exec'd in a module the train file makes and registers as
sys.modules["torch._shardproof_r31_done_work"] (the author's listed gap: op_guard's
Baseline.own_code takes code of a module imported after the baseline whose name starts with
"torch" as torch's own). Refused at 0f22574 (exit 3, "code of the train file ran inside the
call, at torch._shardproof_r31_done_work:9 (__torch_dispatch__)"): the frame's code object is
not the one own_code's lazy scan of the module found (not investigated further)."""



import sys
import time
import types

import torch
import torch.distributed as dist
from torch import nn

MESH = {"dp": 2}
_ENTERED = []
LATE = 1.0
SIZES = {"batch": 8, "hidden": 6, "ffn": 10}


_SRC = """
import torch
import torch._C._distributed_c10d as c10d
from torch.utils._python_dispatch import TorchDispatchMode


class DoneWork(TorchDispatchMode):
    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        if func is torch.ops.c10d.allreduce_.default:
            tensors, _work = out
            f = torch.futures.Future()
            f.set_result(list(tensors))
            return tensors, c10d._create_work_from_future(f).boxed()
        return out
"""


def _done_work_mode():
    """r30c_01's DoneWork mode, its code run in a fresh module named as a torch module (a
    module imported after op_guard's baseline whose name starts with "torch": its functions
    count as torch's own)."""
    name = "torch._shardproof_r31_done_work"
    mod = sys.modules.get(name)
    if mod is None:
        mod = types.ModuleType(name)
        sys.modules[name] = mod
        exec(compile(_SRC, name, "exec"), vars(mod))
    return mod.DoneWork


_done_work_mode()        # made at import


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
