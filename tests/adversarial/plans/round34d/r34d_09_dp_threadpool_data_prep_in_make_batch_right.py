"""Round 34d (dp 2, right): R34d-3 (false refusal, by the guard's design): `make_batch` builds
the batch's rows (pure Python, `random.Random(seed).gauss`) in a `ThreadPoolExecutor(2)` and
makes tensors from the lists on the calling thread; the step is hand-written DDP (one
all-reduce of every gradient). No torch work runs in the pool.
Truth (tests/adversarial/torch4_truth.py FILE 2): w1 0.0, w2 2.8e-17.
prove --torch at 0795de7: exit 3 at the `ex.map` line (39; 33 when run) "(threading.Thread.start)"
(20 s): a false refusal of a right plan (data preparation in threads)."""
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


def _rows(seed, n, h):
    import random
    r = random.Random(seed)
    return [[r.gauss(0.0, 1.0) for _ in range(h)] for _ in range(n)]


def make_batch(s):
    import concurrent.futures
    with concurrent.futures.ThreadPoolExecutor(max_workers=2) as ex:   # right: data prep only
        x, y = ex.map(_rows, [0, 1], [s["batch"]] * 2, [s["hidden"]] * 2)
    return {"x": torch.tensor(x), "y": torch.tensor(y)}


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
