"""Round 36c (dp 2 x tp 2, wrong): R35d-4 (the dp groups' rendezvous crossed) after round 36's
`new_groups._met_as_named` (the store `pg_map` holds for the group must be a PrefixStore made in
the call with prefix "<group name>/" over the world's store). The crossing is moved from
`PrefixStore.__init__` to `ProcessGroupGloo.__init__`, replaced on the class on ranks 2 and 3
while the dp groups are made: the gloo backend is built over `PrefixStore("cpu/",
PrefixStore("<other dp group's name>/", default store))`. The capture's groups use torch's fake
backend: `ProcessGroupGloo` is never constructed there, every PrefixStore is torch's right one,
and nothing in the capture differs. The train file does not test which run it is in.
issue 11's g11_02 otherwise (Megatron MLP over new_group tp / dp groups, hand-written DDP).
Truth (tp_truth): w1 0.0078 / w2 0.0069 (ranks 0, 1), w1 0.0067 / w2 0.0076 (ranks 2, 3).
prove --torch at 072d231: **EQUIVALENT** (4 goals, 103 s): a false accept (R36c-1).
"""

import torch
import torch.distributed as dist
from torch import nn
from torch.distributed.tensor import Shard, distribute_tensor

MESH = {"dp": 2, "tp": 2}
SIZES = {"batch": 8, "hidden": 6, "ffn": 10}
_G = {}


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
    return {"x": torch.zeros(s["batch"], s["hidden"]), "y": torch.zeros(s["batch"], s["hidden"])}


def build_optimizer(model):
    return torch.optim.SGD(model.parameters(), lr=0.1)


def _build_groups():
    # Megatron's parallel_state: every rank makes every group, in the same order
    from torch.distributed import distributed_c10d as c10d
    rank, dp, tp = dist.get_rank(), MESH["dp"], MESH["tp"]
    tp_groups, dp_groups = [], []
    for i in range(dp):
        tp_groups.append(dist.new_group([i * tp + j for j in range(tp)]))
    # WRONG: the dp groups' rendezvous crossed on ranks 2 and 3 through
    # ProcessGroupGloo.__init__ (a class attribute; the class is made only in the real run: the
    # capture's groups are torch's fake backend, whose PrefixStores are the right ones): the
    # gloo backend of group n0 meets under "n1/cpu/" and back. Rank 0 meets rank 3, 1 meets 2
    n0 = str(c10d._world.group_count) + "/"
    n1 = str(c10d._world.group_count + 1) + "/"
    swap = {2: {n0: n1}, 3: {n1: n0}}.get(rank, {})
    gloo = c10d.ProcessGroupGloo
    init = gloo.__init__

    making = [None]

    def crossed(self, store, *a, **k):
        name = swap.get(making[0])
        if name is not None:    # store: PrefixStore("cpu/", PrefixStore("<making>/", default))
            default = store.underlying_store.underlying_store
            store = c10d.PrefixStore("cpu/", c10d.PrefixStore(name, default))
        init(self, store, *a, **k)

    gloo.__init__ = crossed
    try:
        for j, made in zip(range(tp), (n0, n1)):
            making[0] = made
            dp_groups.append(dist.new_group([i * tp + j for i in range(dp)]))
    finally:
        gloo.__init__ = init
    _G["tp"] = tp_groups[rank // tp]
    _G["dp"] = dp_groups[rank % tp]


class _ReduceFromTP(torch.autograd.Function):
    """Megatron's reduce-from-model-parallel region: all-reduce forward, identity backward."""

    @staticmethod
    def forward(ctx, x):
        x = x.clone()
        dist.all_reduce(x, group=_G["tp"])
        return x

    @staticmethod
    def backward(ctx, g):
        return g


def parallelize(model, mesh):
    tp = mesh["tp"]
    model.w1.weight = nn.Parameter(distribute_tensor(model.w1.weight.detach(), tp, [Shard(0)]))
    model.w2.weight = nn.Parameter(distribute_tensor(model.w2.weight.detach(), tp, [Shard(1)]))
    _build_groups()
    return model


def train_step(model, optimizer, batch, mesh):
    x = batch["x"]
    if mesh is None:
        out = model(x)
    else:   # column-parallel w1, row-parallel w2, all-reduce of the partial output over tp
        w1, w2 = model.w1.weight.to_local(), model.w2.weight.to_local()
        out = _ReduceFromTP.apply(nn.functional.silu(x @ w1.t()) @ w2.t())
    loss = ((out - batch["y"]) ** 2).mean()
    loss.backward()
    if mesh is not None:   # hand-written DDP over the dp group of each tp-local gradient block
        g = _G["dp"]
        for p in model.parameters():
            grad = p.grad.to_local()
            dist.all_reduce(grad, group=g)
            grad.div_(dist.get_world_size(group=g))
    optimizer.step()
    optimizer.zero_grad()
    return loss
