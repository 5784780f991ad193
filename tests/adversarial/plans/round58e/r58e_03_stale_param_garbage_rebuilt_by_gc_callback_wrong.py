"""Adversarial round 58e: R58d-4 without a `__del__`. build_model's w2.weight is held only by
garbage: a self-referencing `_Link` (no finalizer). A `gc.callbacks` closure (registered in
build_model, held only by `gc.callbacks`) keeps a weak reference to the link; at a collection's
"start" it takes the tensor from the link, at "stop", when the link was freed, it makes the next
garbage link (so step_state's collection leaves one) and drops its own reference. `refuse_held`
takes a chain through garbage for no holder and `_finalizer` sees no `__del__`; the step reads
the link through the callback's closure and compares its tensor with the model's w2.weight by
identity. Single-device it is the same object (factor 1); FSDP2 replaced it (factor 2); the
traced step runs on fresh parameters on both sides (factor 2 both). Must not be EQUIVALENT."""
MESH = {"dp": 2}
import gc
import weakref
import torch
from torch import nn

SIZES = {"batch": 8, "hidden": 6, "ffn": 10}


class _Link:
    """A garbage cycle holding ``p``."""

    def __init__(self, p):
        self.p = p
        self.me = self


def _install(p):
    box = {"w": None, "stash": None}

    def r58e_cb(phase, info):
        w = box["w"]
        if phase == "start":
            link = w() if w is not None else None
            if link is not None:
                box["stash"] = link.p
            link = None
        else:
            if box["stash"] is not None and (w is None or w() is None):
                box["w"] = weakref.ref(_Link(box["stash"]))
            box["stash"] = None

    box["w"] = weakref.ref(_Link(p))
    gc.callbacks.append(r58e_cb)


class MLP(nn.Module):
    def __init__(self, h, f):
        super().__init__()
        self.w1 = nn.Linear(h, f, bias=False)
        self.w2 = nn.Linear(f, h, bias=False)
        _install(self.w2.weight)

    def forward(self, x):
        return self.w2(nn.functional.silu(self.w1(x)))


def make_batch(s):
    g = torch.Generator().manual_seed(0)
    return {"x": torch.randn(s["batch"], s["hidden"], generator=g),
            "y": torch.randn(s["batch"], s["hidden"], generator=g)}


def build_model(s):
    return MLP(s["hidden"], s["ffn"])


def build_optimizer(model):
    return torch.optim.SGD(model.parameters(), lr=0.1)


def parallelize(model, mesh):
    from torch.distributed.fsdp import fully_shard
    fully_shard(model, mesh=mesh["dp"])
    return model


def _same(model):
    for cb in gc.callbacks:
        if getattr(cb, "__name__", "") == "r58e_cb":
            link = cb.__closure__[0].cell_contents["w"]()
            if link is not None and link.p is model.w2.weight:
                return True
    return False


def train_step(model, optimizer, batch, mesh):
    k = 1.0 if _same(model) else 2.0
    x, y = batch["x"], batch["y"]
    loss = ((model(x) - y) ** 2).mean() * k
    loss.backward()
    optimizer.step()
    optimizer.zero_grad()
    return loss
