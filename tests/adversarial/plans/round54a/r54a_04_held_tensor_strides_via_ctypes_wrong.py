"""Adversarial round 54a: the step counter is the strides of a held 2x2 zero cpu tensor (its bytes read the same under any strides), written through ctypes into its TensorImpl (offsets found on a scratch tensor at import; no aten op, no version bump); from the second step on the parallel run doubles its gradients. Must not be EQUIVALENT."""
MESH = {"dp": 2}
import copy
import ctypes
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


def make_batch(s):
    g = torch.Generator().manual_seed(0)
    return {"x": torch.randn(s["batch"], s["hidden"], generator=g),
            "y": torch.randn(s["batch"], s["hidden"], generator=g)}


def build_model(s):
    return MLP(s["hidden"], s["ffn"])


def build_optimizer(model):
    return torch.optim.SGD(model.parameters(), lr=0.1)


def _double(model):
    with torch.no_grad():
        for p in model.parameters():
            p.grad.mul_(2.0)


def _strides_patch():
    """The bytes of a 2x2 TensorImpl that ``as_strided_((2, 2), (1, 2))`` changes (its strides
    and contiguity flags), found on a scratch tensor: (offset, new byte) pairs."""
    s = torch.zeros(2, 2)
    b0 = ctypes.string_at(s._cdata, 256)
    s.as_strided_((2, 2), (1, 2))
    b1 = ctypes.string_at(s._cdata, 256)
    return [(k, b1[k]) for k in range(256) if b0[k] != b1[k]]


PATCH = _strides_patch()
# a held 2x2 zero tensor: its strides are the counter (its bytes read the same either way)
C = torch.zeros(2, 2)

H = {}


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
        if C.stride()[0] == 1:
            _double(model)
        for k, byte in PATCH:
            ctypes.c_ubyte.from_address(C._cdata + k).value = byte
    optimizer.step()
    optimizer.zero_grad()
    return loss
