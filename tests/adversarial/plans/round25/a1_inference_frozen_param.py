"""A right file: a frozen positional table made under torch.inference_mode (requires_grad False),
added to the activations (add saves nothing for backward, so the real step runs). The new toggle
in accumulator_hooks calls requires_grad_(True) on it, which torch refuses for an inference tensor
outside inference mode: prove crashes instead of answering."""
import torch
import torch.distributed as dist
from torch import nn

MESH = {"dp": 2}
SIZES = {"batch": 8, "hidden": 6, "ffn": 10}


class MLP(nn.Module):
    def __init__(self, h, f):
        super().__init__()
        self.w1 = nn.Linear(h, f, bias=False)
        self.w2 = nn.Linear(f, h, bias=False)
        with torch.inference_mode():
            pos = torch.linspace(0.0, 1.0, h)
        self.pos = nn.Parameter(pos, requires_grad=False)

    def forward(self, x):
        return self.w2(nn.functional.silu(self.w1(x + self.pos)))


def build_model(s):
    return MLP(s["hidden"], s["ffn"])


def make_batch(s):
    return {"x": torch.zeros(s["batch"], s["hidden"]), "y": torch.zeros(s["batch"], s["hidden"])}


def build_optimizer(model):
    return torch.optim.SGD([p for p in model.parameters() if p.requires_grad], lr=0.1)


def parallelize(model, mesh):
    return model


def train_step(model, optimizer, batch, mesh):
    loss = ((model(batch["x"]) - batch["y"]) ** 2).mean()
    loss.backward()
    if mesh is not None:
        for p in model.parameters():
            if p.grad is not None:
                dist.all_reduce(p.grad, group=mesh["dp"].get_group())
                p.grad.div_(mesh["dp"].size())
    optimizer.step()
    optimizer.zero_grad()
    return loss
