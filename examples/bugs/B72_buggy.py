"""B72 buggy: NeMo Automodel PR #1260 (and torchtitan PR #4054), a DTensor backward placement
that defaults to Replicate skips a reduction.

Spec: tokens x (T, X), an input projection ``h = x W_in`` below the experts, E = 2 experts
``W_e (E, H, O)`` whose outputs are summed (``y = sum_e h W_e``), mean squared error; SGD.
Plan: Mesh(ep=2), tokens ``Shard(T)`` over ep, one expert per rank (``Shard(E)``). Each rank
projects its tokens, all-gathers them for its expert (``DTensor.from_local(h, Shard(0))
.full_tensor()``), and the expert outputs go back to the tokens' owners by a reduce-scatter.
Each rank computed a different expert, so the gradient reaching the gathered ``h`` is Partial
over ep and its adjoint is a reduce-scatter; ``full_tensor()`` with the default
``grad_placements`` treats it as Replicate and only slices it (``gather_from_tp_region``:
all-gather forward, split backward): every rank keeps its own expert's share.
Expected: NOT EQUIVALENT at ``grad:W_in`` (everything below the experts is under-reduced;
values); the experts' gradients are right.
Smallest configuration (CASES2.md B72): 2 ranks, one MoE layer (ep = 2).
"""

from fractions import Fraction

from spec_lang import (
    SGD, Axis, Dim, Loss, Mesh, Plan, Shard, Spec, all_reduce, gather_from_tp_region, ops, real,
    reduce_scatter_to_sp_region,
)

EP = Axis.EP
T, X, H, E, O = Dim("T", 4), Dim("X", 2), Dim("H", 2), Dim("E", 2), Dim("O", 2)


def spec_loss(p, d):
    h = ops.einsum(d["x"], p["W_in"], out=(T, H))
    r = ops.einsum(h, p["experts"], out=(T, O), sum_single=(E,)) - d["t"]  # sum over experts
    return ops.sum(r * r) / ops.dim_size(T)


spec = Spec(params={"W_in": (X, H), "experts": (E, H, O)},
            data={"x": real(T, X), "t": real(T, O)}, forward=spec_loss,
            optimizer=SGD(lr=Fraction(1, 10)))


def full_tensor(h_local):
    """``DTensor.from_local(h, Shard(0)).full_tensor()`` with the default grad_placements."""
    return gather_from_tp_region(h_local, T, EP)           # BUG: backward = slice (Replicate)


def forward(p, d):
    h = full_tensor(ops.einsum(d["x"], p["W_in"], out=(T, H)))          # every token
    y_mine = ops.einsum(h, p["experts"], out=(T, O), sum_single=(E,))   # this rank's expert
    r = reduce_scatter_to_sp_region(y_mine, T, EP) - d["t"]             # back to the owners
    local = ops.sum(r * r) / ops.dim_size(T)
    return Loss(backward=local, report=all_reduce(local, EP))


tokens = {EP: Shard(T)}
plan = Plan(mesh=Mesh(ep=2), placements={"x": tokens, "t": tokens, "experts": {EP: Shard(E)}},
            forward=forward, reduce_grads={"W_in": lambda name, g: all_reduce(g, EP)})
