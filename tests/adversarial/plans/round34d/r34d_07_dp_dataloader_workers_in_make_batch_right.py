"""Round 34d (dp 2, right): a false-refusal probe: `make_batch` reads the batch through a
`torch.utils.data.DataLoader(num_workers=2)` (worker processes). Truth: w1 0.0, w2 2.8e-17.
prove --torch at 0795de7: exit 3 at line 35 (29 when run), "RuntimeError: Tensor.item() cannot
be called on meta tensors" (9 s): refused before any worker starts, because `make_batch` runs
on meta tensors and the loader's shared seed is `torch.empty((), dtype=int64).random_().item()`;
any DataLoader iterated in `make_batch` is refused this way (num_workers=0 too), not by the
thread guard. Not counted as a guard false refusal (see r34d_09)."""
MESH = {"dp": 2}
import torch
import torch.distributed as dist
from torch import nn

SIZES = {"batch": 8, "hidden": 6, "ffn": 10}


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
    g = torch.Generator().manual_seed(0)
    ds = torch.utils.data.TensorDataset(torch.randn(s["batch"], s["hidden"], generator=g),
                                        torch.randn(s["batch"], s["hidden"], generator=g))
    dl = torch.utils.data.DataLoader(ds, batch_size=s["batch"], num_workers=2)
    x, y = next(iter(dl))
    return {"x": x, "y": y}


def build_optimizer(model):
    return torch.optim.SGD(model.parameters(), lr=0.1)


def parallelize(model, mesh):
    return model


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
