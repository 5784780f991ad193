"""Round 39a (dp 2, right): the model class derives from the code base's abstract
`Model(nn.Module, abc.ABC)` (an `@abc.abstractmethod init_weights`): e505167 reads an ABC of a
module's class chain by its registry (`_abc_registry`), but the user's ABC is also a global of
the train file, read as a class by its `vars()` (`_abc_impl`, opaque C).
Truth (torch4_truth.py FILE 1): 0 / 0 (right).
Verdict (main 6e50b4f): UNKNOWN (33 s) "cannot read module <model> class MLP (!<holds opaque
_abc._abc_data>)": false refusal R39a-6. The class dict's own `_abc_impl` is read by its
registry, but `__init__`'s `super()` cell `__class__` holds the class, encoded by the
encoder's `type` case with `vars()` as they are (`_abc_impl` raw).
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
        return self.b(nn.functional.silu(self.a(x)))


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
    optimizer.step()
    optimizer.zero_grad()
    return loss


def parallelize(model, mesh):
    return model
