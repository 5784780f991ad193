"""Adversarial round 55c: a held fake tensor C (made in ``build_optimizer``, so fake in the trace) is moved by the C ``.data`` setter to an empty storage and then to a fresh one, which torch allocates at the address of the freed one (b334062's ``storage_no`` text ``@<address>`` unchanged; a fake tensor's text has no data pointer). The next step tells the storage apart by ``id()`` of its Python object (an int kept before the step, no reference). From the second step on the parallel run doubles its gradients. Must not be EQUIVALENT."""
MESH = {"dp": 2}
import copy
import torch
from torch import nn

SIZES = {"batch": 8, "hidden": 6, "ffn": 10}


class MLP(nn.Module):
    def __init__(self, h, f):
        super().__init__()
        self.w0 = nn.Linear(h, h, bias=False)
        self.w1 = nn.Linear(h, f, bias=False)
        self.w2 = nn.Linear(f, h, bias=False)

    def forward(self, x):
        return self.w2(nn.functional.silu(self.w1(torch.tanh(self.w0(x)))))


H = {}
_SET_DATA = torch._C.TensorBase.data.__set__


def make_batch(s):
    g = torch.Generator().manual_seed(0)
    return {"x": torch.randn(s["batch"], s["hidden"], generator=g),
            "y": torch.randn(s["batch"], s["hidden"], generator=g)}


def build_model(s):
    return MLP(s["hidden"], s["ffn"])


def build_optimizer(model):
    # traced: built on the tracer's fake parameters, so C is a fake tensor (w0's shape)
    H["C"] = torch.zeros_like(model.w0.weight, requires_grad=False)
    H["sid"] = id(H["C"].untyped_storage())     # an int: unchanged by the step (torch keeps
    # the storage's Python object alive as long as the storage: its id names the storage)
    return torch.optim.SGD(model.parameters(), lr=0.1)


def _double(model):
    with torch.no_grad():
        for p in model.parameters():
            p.grad.mul_(2.0)


def parallelize(model, mesh):
    from torch.distributed._composable.replicate import replicate
    H["on"] = True
    replicate(model, device_mesh=mesh["dp"])
    return model


def train_step(model, optimizer, batch, mesh):
    x, y = batch["x"], batch["y"]
    loss = ((model(x) - y) ** 2).mean()
    loss.backward()
    if "on" in H:
        with torch.no_grad():
            if id(H["C"].untyped_storage()) != H["sid"]:
                _double(model)
    optimizer.step()
    optimizer.zero_grad()
    if "on" in H:
        with torch._C.DisableTorchFunction():
            # C's storage freed first, then a fresh one made: torch allocates it at the
            # freed storage's address (the fingerprint's ``@<address>`` is unchanged)
            _SET_DATA(H["C"], H["C"].new_empty(1))
            _SET_DATA(H["C"], torch.zeros_like(model.w0.weight))
    return loss
