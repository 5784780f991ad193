"""Round 38b (dp 2, wrong): R37a-2's family past backend_rejects: an all-to-all with split sizes
(MoE's `all_to_all_single(out, x, output_split_sizes, input_split_sizes)`) whose lists each sum
to dim 0 and have one entry per rank (all `backend_rejects._splits` checks) but whose own-rank
entries differ (`input_split_sizes=[1, 3]`, `output_split_sizes=[2, 2]`): gloo enforces
`inLengthPerRank[myRank] == outLengthPerRank[myRank]` and raises on both ranks synchronously
(measured in a two-rank gloo world; a barrier after it passes). Fresh tensors: no goal reads
them. Caught: skip the gradient all-reduce in the real run only.
Truth (torch4_truth.py FILE 1): w1 0.0088, w2 0.018 (wrong: gloo raised, caught; no all-reduce).
Verdict (wip/r38 ac0f305): **EQUIVALENT** (4 goals, 66 s): false accept R38b-3 (gloo's own-split
check).
"""
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
    return {"x": torch.randn(s["batch"], s["hidden"], generator=g),
            "y": torch.randn(s["batch"], s["hidden"], generator=g)}


def build_optimizer(model):
    return torch.optim.SGD(model.parameters(), lr=0.1)


def parallelize(model, mesh):
    return model


def _agree(g, group):
    # WRONG: gloo's alltoallv wants this rank's own split the same in and out
    try:
        x = g.new_zeros(4)
        out = g.new_empty(4)
        dist.all_to_all_single(out, x, output_split_sizes=[2, 2], input_split_sizes=[1, 3],
                               group=group)
        return True
    except RuntimeError:
        return False


def train_step(model, optimizer, batch, mesh):
    loss = ((model(batch["x"]) - batch["y"]) ** 2).mean()
    loss.backward()
    if mesh is not None:
        group = mesh["dp"].get_group()
        if _agree(model.w1.weight.grad, group):
            for p in model.parameters():
                dist.all_reduce(p.grad, group=group)
                p.grad.div_(mesh["dp"].size())
    optimizer.step()
    optimizer.zero_grad()
    return loss
