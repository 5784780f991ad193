"""Round 38e (dp 2, wrong): a lambda's error turned into a value by a caller outside the file:
`ThreadPoolExecutor.submit(lambda: raiser)`, then `fut.exception()` (returns the exception,
raises nothing). The raiser `bytes(g.untyped_storage())` (NotImplementedError in the capture
only) runs in a worker thread; the guard records it there (`sys.exc_info()` is per thread, the
list global). Real run `n = 2.0`, capture `n = 1.0` unless refused.
Truth (torch4_truth.py FILE 1): w1 0.0070, w2 0.0093 (wrong: lr 0.2 in the real run).
Verdict (main 195d560): exit 3 (8 s), "starts a thread ... (threading.Thread.start)" (R34b-2):
sound, by the thread refusal before the guard matters.
"""
MESH = {"dp": 2}
import torch
import torch.distributed as dist
from torch import nn
import concurrent.futures

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
    return {"x": torch.randn(s["batch"], s["hidden"], generator=g),
            "y": torch.randn(s["batch"], s["hidden"], generator=g)}


def build_optimizer(model):
    return torch.optim.SGD(model.parameters(), lr=0.1)


def parallelize(model, mesh):
    return model

def _n(g):
    with concurrent.futures.ThreadPoolExecutor(1) as ex:
        fut = ex.submit(lambda: len(bytes(g.untyped_storage())))
        return 1.0 if fut.exception() is not None else 2.0   # WRONG: the error as a value


def train_step(model, optimizer, batch, mesh):
    ws = mesh["dp"].size() if mesh is not None else 1
    loss = ((model(batch["x"]) - batch["y"]) ** 2).mean() / ws
    loss.backward()
    if mesh is not None:
        for p in model.parameters():
            dist.all_reduce(p.grad, group=mesh["dp"].get_group())
        optimizer.param_groups[0]["lr"] = 0.1 * _n(model.w1.weight.grad)
    optimizer.step()
    optimizer.zero_grad()
    return loss
