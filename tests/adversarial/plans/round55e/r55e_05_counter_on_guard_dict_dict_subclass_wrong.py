"""Adversarial round 55e: the step counter is an attribute of an empty dict subclass set as the ``__dict__`` of the function under ``dispatch`` of the object under w0's weight's ``fake_mode`` key (in the trace the capture's own guard; ``own_guards._same`` compares ``dict(f.__kwdefaults__ or {})`` / ``dict(f.__annotations__)`` / the doc and names by ``==`` and ``check_guard`` asks only ``not vars(f)``, so an empty dict subclass that carries the counter as an attribute passes; in the real run the user's function). From the second step on the parallel run doubles its gradients. Must not be EQUIVALENT."""
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


class _Box(dict):
    """An empty dict (equal to ``{}``, false) that carries the counter as an attribute."""


def _user_dispatch(*a, **k):
    return None


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
            "fake_mode", types.SimpleNamespace(dispatch=_user_dispatch))
        f = getattr(fm.dispatch, "__func__", fm.dispatch)
        box = f.__dict__
        if not isinstance(box, _Box):
            box = _Box()
            box.n = 0
            f.__dict__ = box
        if box.n:
            _double(model)
        box.n += 1
    optimizer.step()
    optimizer.zero_grad()
    return loss
