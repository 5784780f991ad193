"""Round 36c (dp 2, right): a false-refusal probe of round 36's refusing kernels. torchtitan's
`set_determinism` with no seed: rank 0 draws a seed from a real CPU tensor and broadcasts it
over the world (a collective on a real tensor, in `build_model`); the weights it seeds are the
proof's symbols anyway. Hand-written DDP; the step ends with a `dist.barrier()` over dp and a
`dist.get_rank() == 0` branch that only logs.
Truth (torch4_truth FILE 1): w1 5.6e-17, w2 0.0 (right).
prove --torch at 072d231: **exit 3** (13 s) at the `set_determinism()` line, "a collective on a
tensor that is not the step's ... (c10d::broadcast_ on a real tensor)": a false refusal (R36c-4).
"""
MESH = {"dp": 2}
import torch
import torch.distributed as dist
from torch import nn
from torch.distributed import distributed_c10d as c10d

SIZES = {"batch": 8, "hidden": 6, "ffn": 10}


class MLP(nn.Module):
    def __init__(self, h, f):
        super().__init__()
        self.w1 = nn.Linear(h, f, bias=False)
        self.w2 = nn.Linear(f, h, bias=False)

    def forward(self, x):
        return self.w2(nn.functional.silu(self.w1(x)))


def set_determinism(seed=None):
    """torchtitan's ``dist_utils.set_determinism`` (seed=None): rank 0 draws a seed and
    broadcasts it, so that every rank initialises the same weights."""
    if dist.is_initialized() and seed is None:
        seed_tensor = torch.get_rng_state()[:8].to("cpu")
        dist.broadcast(seed_tensor, src=0)
        seed = int(seed_tensor.view(torch.uint64).item()) % (2 ** 63)
    torch.manual_seed(seed if seed is not None else 0)


def build_model(s):
    set_determinism()
    return MLP(s["hidden"], s["ffn"])


def make_batch(s):
    g = torch.Generator().manual_seed(0)
    return {"x": torch.randn(s["batch"], s["hidden"], generator=g),
            "y": torch.randn(s["batch"], s["hidden"], generator=g)}


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
        dist.barrier(group=mesh["dp"].get_group())
        if dist.get_rank() == 0:
            print("step done", flush=True)
    optimizer.step()
    optimizer.zero_grad()
    return loss
