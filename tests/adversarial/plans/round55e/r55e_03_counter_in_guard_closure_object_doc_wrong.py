"""Adversarial round 55e: the step counter is the ``__doc__`` of the function in the closure cell ``seen`` of the function under ``dispatch`` of the object under w0's weight's ``fake_mode`` key (in the trace ``storage_writes.on_writes``'s ``each``, held by the capture guard's closure: ``check_guard`` compares the cell's object by identity only, an object changed in place is declared out of scope; in the real run the user's closure). From the second step on the parallel run doubles its gradients. Must not be EQUIVALENT."""
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


H = {}


def _make():
    def seen(*a, **k):
        return None

    def dispatch(*a, **k):
        return seen(*a, **k)
    return dispatch


def parallelize(model, mesh):
    from torch.distributed._composable.replicate import replicate
    H["on"] = True
    replicate(model, device_mesh=mesh["dp"])
    return model


def train_step(model, optimizer, batch, mesh):
    import types
    x, y = batch["x"], batch["y"]
    loss = ((model(x) - y) ** 2).mean()
    loss.backward()
    if "on" in H:
        fm = vars(model.w0.weight).setdefault(
            "fake_mode", types.SimpleNamespace(dispatch=_make()))
        f = getattr(fm.dispatch, "__func__", fm.dispatch)
        cells = dict(zip(f.__code__.co_freevars, f.__closure__ or ()))
        s = cells["seen"].cell_contents
        n = int(s.__doc__) if (s.__doc__ or "").isdigit() else 0
        if n:
            _double(model)
        s.__doc__ = str(n + 1)    # an object the guard's closure holds, changed in place
    optimizer.step()
    optimizer.zero_grad()
    return loss
