"""Added at stop 40 (not by the round's reviewer), with the R39a-6 fix: r39a_15's model class
derives from an abstract `Model(nn.Module, abc.ABC)`; the parallel step registers `float`
with it, so the next forward's `isinstance(1.5, Model)` branch doubles the output on the ranks
only (wrong from step 2). R39a-6's fix reads an ABC reached through a method's `super()` cell
by its registry: the registry must still be compared.
Truth (torch4_truth.py FILE 2): step 1 0 / 0; step 2 a.weight 0.015, b.weight 0.0088.
Verdict (stop 40): UNKNOWN (57 s) "the parallel step changes module <model> class Model".
"""
MESH = {"dp": 2}
import torch
import torch.distributed as dist
from torch import nn
import abc

SIZES = {"batch": 8, "hidden": 6}


class Model(nn.Module, abc.ABC):
    """A code base's abstract model: every model says how it is initialised."""

    @abc.abstractmethod
    def init_weights(self):
        ...


class MLP(Model):
    def __init__(self, h):
        super().__init__()
        self.a = nn.Linear(h, h, bias=False)
        self.b = nn.Linear(h, h, bias=False)

    def init_weights(self):
        pass

    def forward(self, x):
        scale = 2.0 if isinstance(1.5, Model) else 1.0     # what the registry says
        return self.b(nn.functional.silu(self.a(x))) * scale


def build_model(s):
    return MLP(s["hidden"])


def make_batch(s):
    g = torch.Generator().manual_seed(0)
    return {"x": torch.randn(s["batch"], s["hidden"], generator=g),
            "y": torch.randn(s["batch"], s["hidden"], generator=g)}


def build_optimizer(model):
    return torch.optim.SGD(model.parameters(), lr=0.1)


def train_step(model, optimizer, batch, mesh):
    ws = mesh["dp"].size() if mesh is not None else 1
    loss = ((model(batch["x"]) - batch["y"]) ** 2).mean() / ws
    loss.backward()
    if mesh is not None:
        for p in model.parameters():
            dist.all_reduce(p.grad, group=mesh["dp"].get_group())
        Model.register(float)        # the parallel run only: its next forward doubles
    optimizer.step()
    optimizer.zero_grad()
    return loss


def parallelize(model, mesh):
    return model
