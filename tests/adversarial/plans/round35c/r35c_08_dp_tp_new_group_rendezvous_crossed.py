"""Round 35c (dp 2 x tp 2, wrong): issue 11's g11_02 (Megatron MLP over ``dist.new_group``
tp / dp groups, every rank makes every group in the same order, same names) with the dp
groups' rendezvous crossed: while they are made, ranks 2 and 3 have the default store in
``_world.pg_map`` (a dict entry, not a function) replaced by a ``dist.Store`` that moves the
keys under one dp group's name to the other's. In the real run rank 0 pairs with rank 3 and
rank 1 with rank 2 (each a group rank 0 with a group rank 1), so each dp all-reduce sums two
*different* tp blocks of a gradient. Every traced rank records the same calls and names.
Truth (tp_truth): w1 0.0078 / w2 0.0069 (ranks 0, 1), w1 0.0067 / w2 0.0076 (ranks 2, 3). Prove at
761d5b3: **EQUIVALENT** (4 goals, 85 s): finding R35c-2, a false accept."""

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


class _Rewrite(dist.Store):
    """The default store, with the keys under one group name moved under another."""

    def __init__(self, base, src, dst):
        super().__init__()
        self.base, self.src, self.dst = base, src, dst

    def _k(self, key):
        return self.dst + key[len(self.src):] if key.startswith(self.src) else key

    def set(self, key, value):
        self.base.set(self._k(key), value)

    def get(self, key):
        return self.base.get(self._k(key))

    def add(self, key, value):
        return self.base.add(self._k(key), value)

    def compare_set(self, key, expected, desired):
        return self.base.compare_set(self._k(key), expected, desired)

    def check(self, keys):
        return self.base.check([self._k(k) for k in keys])

    def wait(self, keys, *timeout):
        return self.base.wait([self._k(k) for k in keys], *timeout)

    def delete_key(self, key):
        return self.base.delete_key(self._k(key))

    def num_keys(self):
        return self.base.num_keys()

    def set_timeout(self, timeout):
        return self.base.set_timeout(timeout)


def _build_groups():
    # Megatron's parallel_state: every rank makes every group, in the same order
    from torch.distributed import distributed_c10d as c10d
    rank, dp, tp = dist.get_rank(), MESH["dp"], MESH["tp"]
    tp_groups, dp_groups = [], []
    for i in range(dp):
        tp_groups.append(dist.new_group([i * tp + j for j in range(tp)]))
    # WRONG: the dp groups' rendezvous keys crossed on ranks 2 and 3 (default store swapped
    # while they are made): rank 0 meets rank 3, rank 1 meets rank 2
    default = c10d._get_default_group()
    backend, store = c10d._world.pg_map[default]
    n0 = str(c10d._world.group_count)
    n1 = str(c10d._world.group_count + 1)
    if rank == 2:
        c10d._world.pg_map[default] = (backend, _Rewrite(store, n0 + "/", n1 + "/"))
    if rank == 3:
        c10d._world.pg_map[default] = (backend, _Rewrite(store, n1 + "/", n0 + "/"))
    for j in range(tp):
        dp_groups.append(dist.new_group([i * tp + j for i in range(dp)]))
    c10d._world.pg_map[default] = (backend, store)
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
