"""Round 30c (pp 2): r30_03 with the DoneWork dispatch mode entered *inside* the schedule's
transfers, after the capture's p2p wrapper checked the mode stack: torch.Tensor.is_complex
(asked by dist.isend / dist.irecv just before group.send / recv) enters it; torch.Tensor.shape
(read by the capture's p2p wrapper before its check) exits it. Both restored after the step."""


import time

import torch
import torch._C._distributed_c10d as c10d
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn
from torch.distributed.pipelining import PipelineStage, ScheduleGPipe
from torch.utils._python_dispatch import TorchDispatchMode, _get_current_dispatch_mode_stack

MESH = {"pp": 2}
SIZES = {"batch": 8, "d": 8, "h": 16, "vocab": 12}


class MLP(nn.Module):
    def __init__(self, d, h, v):
        super().__init__()
        self.l0 = nn.Linear(d, h)
        self.l1 = nn.Linear(h, v)

    def forward(self, x):
        h = torch.tanh(self.l0(x))
        return self.l1(h)


class Stage(nn.Module):
    def __init__(self, model, stage):
        super().__init__()
        self.l0 = model.l0 if stage == 0 else None
        self.l1 = model.l1 if stage == 1 else None

    def forward(self, h):
        if self.l0 is not None:
            h = torch.tanh(self.l0(h))
        if self.l1 is not None:
            h = self.l1(h)
        return h


def _done_work_mode():
    """A TorchDispatchMode (a class made per step: entering a mode marks its class)."""

    class DoneWork(TorchDispatchMode):
        """c10d.recv_ / send_ run as issued; the work handed back is a finished future's."""

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            if func in (torch.ops.c10d.recv_.default, torch.ops.c10d.send.default) \
                    and args[0][0].is_floating_point():   # the activations / gradients
                f = torch.futures.Future()
                f.set_result(None)
                return c10d._create_work_from_future(f).boxed()
            return out

    return DoneWork


def build_model(s):
    return MLP(s["d"], s["h"], s["vocab"])


def make_batch(s):
    return {"x": torch.zeros(s["batch"], s["d"]), "y": torch.zeros(s["batch"], dtype=torch.long)}


def build_optimizer(model):
    return torch.optim.SGD(model.parameters(), lr=0.5)


def loss_fn(pred, y):
    return F.cross_entropy(pred, y)


def parallelize(model, mesh):
    return Stage(model, mesh["pp"].get_local_rank())


def train_step(model, optimizer, batch, mesh):
    if mesh is None:
        loss = loss_fn(model(batch["x"]), batch["y"])
        loss.backward()
    else:
        pp = mesh["pp"]
        stage = PipelineStage(model, pp.get_local_rank(), pp.size(), torch.device("cpu"),
                              group=pp.get_group())
        schedule = ScheduleGPipe(stage, n_microbatches=2, loss_fn=loss_fn)
        if dist.get_rank() == 0:
            time.sleep(1.0)               # a straggler
        losses = []
        mode = _done_work_mode()()
        entered = []

        def is_complex(self):      # isend / irecv ask it after the capture's mode check
            if not entered:
                mode.__enter__()
                entered.append(1)
            return torch._C.TensorBase.is_complex(self)

        def shape(self):           # read before the capture's mode check: out of the mode
            stack = _get_current_dispatch_mode_stack()
            if entered and stack and stack[-1] is mode:   # not inside the mode's own dispatch
                entered.clear()
                mode.__exit__(None, None, None)
            return torch._C.TensorBase.shape.__get__(self)

        torch.Tensor.is_complex = is_complex
        torch.Tensor.shape = property(shape)
        try:
            schedule.step(*((batch["x"],) if stage.is_first else ()), target=batch["y"],
                          losses=losses)
        finally:
            del torch.Tensor.is_complex
            del torch.Tensor.shape
            if entered:
                entered.clear()
                mode.__exit__(None, None, None)
        loss = torch.stack(losses).mean() if stage.is_last else None
    optimizer.step()
    optimizer.zero_grad()
    return loss
