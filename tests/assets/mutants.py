"""Mutants of the Megatron debug plans, as data: each must be rejected.

:data:`MUTANTS` is the table (one row per mutant: id, the bug in words, the base example, the
goal the counterexample must name, the plan/spec ratio on that goal when it is a constant, and
the bug class it stands for); :func:`build` makes the mutated ``(spec, plan)``. Every mutant is
a small change to the correct plan of ``examples/llama_debug_megatron.py`` (``debug``: 4 query /
2 KV heads, KV heads split over tp) or ``examples/llama_debug_megatron_kvrep.py`` (``kvrep``:
1 KV head, replicated, query groups split), both at tp=2, dp=2, K=2 micro-batches.

Four ways to make a mutant, from the most to the least "plan data":

* a changed :class:`~spec_lang.plans.MegatronSettings` field (a region's declared backward, a
  scale factor, a reduction group, the token-count group);
* a wrapper of the plan's ``forward`` or ``reduce_grads`` (a rotated shard, a dropped mask, an
  extra all-reduce);
* a term rewrite of the traced per-rank forward (a per-rank constant: ``RANK_CONST`` in place of
  the norm epsilon or the attention scale; RoPE's cos and sin swapped), applied before autodiff;
* a replaced attention block (the head dim cut across ranks), patched in while the plan traces.

:data:`STATIC_MUTANTS` are bugs the DSL's types reject while tracing (``PlanError``, ``prove``
exit 3): they never reach the refuter.

``goal`` is the goal the counterexample names: the first diverging goal in dataflow order (the
loss, then gradients in the order backward computes them, so the head's ``grad:output`` and the
last layer come first; ``proofs.counterexample.goal_order``); ``ratio`` is plan / spec on it
where the bug is a constant factor (``2`` = tp = dp = K at these sizes), else ``None``.
"""

from __future__ import annotations

import contextlib
import importlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from fractions import Fraction

from spec_lang import AdamW, Loss, Plan, Shard, Spec, ops
from spec_lang.collectives import all_reduce, gather_from_tp_region, scatter_to_tp_region
from spec_lang.models import DEBUG, llama
from spec_lang.plans import (
    GATHER_FROM_TP, GRAD_ACCUM, LOSS_PREFACTOR, MegatronSettings, MegatronTP, Scale, layer_plan,
    megatron,
)
from spec_lang.spec import Params
from spec_lang.tensor import Tensor
from spec_lang.term import Axis, Op, Term, term, walk

TP, DP = Axis.TP, Axis.DP
llama_module = importlib.import_module("spec_lang.models.llama")  # the package re-exports llama()
TP_SIZE, DP_SIZE, K = 2, 2, 2

BASES = {
    "debug": DEBUG,
    "kvrep": replace(DEBUG, name="debug_kvrep", n_kv_heads=1),
}
"""The two example configurations (``examples/llama_debug_megatron*.py``)."""


@dataclass(frozen=True)
class Mutant:
    """One row of the mutant table."""

    id: str
    description: str
    base: str
    goal: str
    ratio: Fraction | None
    kind: str
    make: Callable[[], tuple[Spec, Plan]]


# -- the correct plans -----------------------------------------------------------------------------

def correct(base: str, *, settings: MegatronSettings | None = None, layers=None
            ) -> tuple[Spec, Plan]:
    """The example plan of ``base`` (optionally with changed settings or layer placements)."""
    model = llama(BASES[base])
    return model.spec(AdamW()), megatron(model, tp=TP_SIZE, dp=DP_SIZE, microbatches=K,
                                         settings=settings, layers=layers)


def _settings(base: str = "debug", **changes) -> Callable[[], tuple[Spec, Plan]]:
    return lambda: correct(base, settings=MegatronSettings(**changes))


# -- wrappers --------------------------------------------------------------------------------------

def _wrap_forward(base: str, change: Callable[[Params, dict], tuple[Params, dict]]
                  ) -> Callable[[], tuple[Spec, Plan]]:
    """The correct plan whose forward first applies ``change`` to its local params and data."""
    def make() -> tuple[Spec, Plan]:
        spec, plan = correct(base)
        inner = plan.forward

        def forward(p, data):
            return inner(*change(p, dict(data)))
        return spec, replace(plan, forward=forward)
    return make


def _rewrite(t: Term, fn: Callable[[Term, tuple[Term, ...]], Term | None]) -> Term:
    """Rebuild ``t`` bottom-up; ``fn(node, new_args)`` returns a replacement or None."""
    new: dict[int, Term] = {}
    for n in walk(t):
        args = tuple(new[id(c)] for c in n.args)
        r = fn(n, args)
        if r is None:
            r = n if all(a is b for a, b in zip(args, n.args)) else term(n.op, args, n.attrs, n.dims)
        new[id(n)] = r
    return new[id(t)]


def _rewrite_forward(base: str, fn: Callable[[Term, tuple[Term, ...]], Term | None]
                     ) -> Callable[[], tuple[Spec, Plan]]:
    """The correct plan whose traced forward (seed and report) is rewritten by ``fn``."""
    def make() -> tuple[Spec, Plan]:
        spec, plan = correct(base)
        inner = plan.forward

        def forward(p, data):
            out = inner(p, data)
            return Loss(backward=Tensor(_rewrite(out.backward.term, fn), out.backward.site),
                        report=Tensor(_rewrite(out.report.term, fn), out.report.site))
        return spec, replace(plan, forward=forward)
    return make


@contextlib.contextmanager
def _patched(obj: object, name: str, value: object) -> Iterator[None]:
    old = getattr(obj, name)
    setattr(obj, name, value)
    try:
        yield
    finally:
        setattr(obj, name, old)


def _params(p: Params, **changes: Callable[[Tensor], Tensor]) -> Params:
    ts = {k: p[k] for k in p}
    for k, f in changes.items():
        ts[k.replace("__", ".")] = f(ts[k.replace("__", ".")])
    return Params(ts)


# -- the individual bugs ---------------------------------------------------------------------------

def _rotated_shard(w: Tensor, dim: str) -> Tensor:
    """Rank r gets block r+1 (mod tp) of ``w`` (Shard(dim) over tp) instead of block r."""
    full = gather_from_tp_region(w, dim, TP)                     # (.., dim, ..) on every rank
    blocks = ops.chunks(full, dim, TP_SIZE)
    tmp = f"{dim}_block"
    rotated = ops.concat([ops.rename(ops.rename(blocks[(i + 1) % TP_SIZE], dim, tmp), tmp, dim,
                                     block=(i, TP_SIZE)) for i in range(TP_SIZE)], dim)
    return scatter_to_tp_region(rotated, dim, TP)


def _mask_dropped_on_dp_rank_1(p: Params, data: dict) -> tuple[Params, dict]:
    m = data["mask"]
    data["mask"] = m + ops.rank_const(DP, [0, 1]) * (1 - m)      # rank 1: every token counts
    return p, data


def _eps_on_tp_rank_1(n: Term, args: tuple[Term, ...]) -> Term | None:
    """X"""
    if n.op is Op.CONST and n.attrs[0] == DEBUG.norm_eps:
        return term(Op.RANK_CONST, (), (str(TP), (DEBUG.norm_eps, Fraction(1, 10**3))), ())
    return None


def _attention_scale_on_tp_rank_1(n: Term, args: tuple[Term, ...]) -> Term | None:
    """Scores scale 1/sqrt(HD) on rank 0, 1/HD on rank 1 (a WHERE on a RANK_CONST)."""
    if n.op is Op.RSQRT and args[0].op is Op.DIM_SIZE and args[0].attrs == ("HD",):
        on_rank_0 = term(Op.RANK_CONST, (), (str(TP), (Fraction(1), Fraction(0))), ())
        return term(Op.WHERE, (on_rank_0, n, term(Op.RECIP, args, (), ())), (), ())
    return None


def _local_max_in_cross_entropy(n: Term, args: tuple[Term, ...]) -> Term | None:
    """The cross-entropy's max is not all-reduced: each rank shifts by its own local max."""
    if n.op is Op.ALL_REDUCE and n.attrs == (str(TP), "max"):
        return args[0]
    return None


def _rope_cos_sin_swapped(n: Term, args: tuple[Term, ...]) -> Term | None:
    if n.op is Op.ROPE_COS:
        return term(Op.ROPE_SIN, (), n.attrs, n.dims)
    if n.op is Op.ROPE_SIN:
        return term(Op.ROPE_COS, (), n.attrs, n.dims)
    return None


def _attention_head_dim_split(p, x, c, d, ctx):
    """``llama.attention`` with wq/wk/wv/wo cut along the head dim HD instead of by heads.

    x: (B, S, H). Each rank holds an HD block of every head: RoPE rotates pairs inside the block
    (tables split the same way), and ``q . k`` over the block is a partial sum over tp that goes
    into softmax without an all-reduce.
    """
    h = ctx.enter_tp(x, d)
    q = ops.einsum(h, p["wq"], out=(d.B, d.S, d.KVH, d.G, d.HD))    # HD[tp]
    k = ops.einsum(h, p["wk"], out=(d.B, d.S, d.KVH, d.HD))
    v = ops.einsum(h, p["wv"], out=(d.B, d.S, d.KVH, d.HD))
    cos = scatter_to_tp_region(ops.rope_cos(d.S, d.HD_half, c.rope_theta), d.HD_half, TP)
    sin = scatter_to_tp_region(ops.rope_sin(d.S, d.HD_half, c.rope_theta), d.HD_half, TP)

    def rope(t):
        t1 = ops.rename(ops.chunk(t, d.HD, 2, 0), d.HD, d.HD_half)
        t2 = ops.rename(ops.chunk(t, d.HD, 2, 1), d.HD, d.HD_half)
        return ops.concat([ops.rename(t1 * cos - t2 * sin, d.HD_half, d.HD, block=(0, 2)),
                           ops.rename(t2 * cos + t1 * sin, d.HD_half, d.HD, block=(1, 2))], d.HD)

    q, k = rope(q), ops.rename(rope(k), d.S, d.T)
    v = ops.rename(v, d.S, d.T)
    scores = ops.einsum(q, k, out=(d.B, d.KVH, d.G, d.S, d.T)) * ops.rsqrt(ops.dim_size(d.HD))
    probs = ops.softmax(scores, d.T, mask=ops.causal_mask(d.S, d.T))
    o = ops.einsum(probs, v, out=(d.B, d.S, d.KVH, d.G, d.HD))
    return ctx.exit_tp(ops.einsum(o, p["wo"], out=(d.B, d.S, d.H)), d)


def _kv_split_head_dim() -> tuple[Spec, Plan]:
    base = "kvrep"
    d = llama(BASES[base]).dims
    lp = layer_plan(BASES[base], TP_SIZE)
    for w in ("attn.wq", "attn.wk", "attn.wv", "attn.wo"):
        lp[w] = {TP: Shard(d.HD)}
    spec, plan = correct(base, layers=lp)
    inner = plan.forward

    def forward(p, data):
        with _patched(llama_module, "attention", _attention_head_dim_split):
            return inner(p, data)
    return spec, replace(plan, forward=forward)


def _extra_tp_allreduce_on_norm_grads() -> tuple[Spec, Plan]:
    spec, plan = correct("debug")
    inner = plan.reduce_grads

    def reduce_grads(name, g):
        g = inner(name, g)
        return all_reduce(g, TP) if name.endswith("norm") else g
    return spec, replace(plan, reduce_grads=reduce_grads)


TP_AVERAGE = Scale("1/tp", ((TP, -1),), "mutant: all_reduce avg where Megatron sums")


# -- the table -------------------------------------------------------------------------------------

MUTANTS: tuple[Mutant, ...] = (
    Mutant("drop_row_parallel_allreduce",
           "row-parallel wo/w2 outputs are not all-reduced over tp (g's forward is identity)",
           "debug", "loss", None, "missing all-reduce (TrainVerify)",
           _settings(row_parallel_reduce=("identity", "identity"))),
    Mutant("copy_to_tp_identity_backward",
           "copy_to_tp declared with an identity backward: the input gradient of column-parallel "
           "layers stays a per-rank partial sum",
           "debug", "grad:norm", None, "missing backward all-reduce (TrainVerify)",
           _settings(copy_to_tp=("identity", "identity"))),
    Mutant("swap_wo_shard_order",
           "layers.0.attn.wo: rank r holds row block r+1 (mod tp), not the heads its wq/wk/wv "
           "produce",
           "debug", "loss", None, "swapped shard order",
           _wrap_forward("debug", lambda p, data: (_params(
               p, layers__0__attn__wo=lambda w: _rotated_shard(w, "KVH")), data))),
    Mutant("avg_instead_of_sum_over_tp",
           "the row-parallel reduction averages over tp (all_reduce avg) instead of summing",
           "debug", "loss", None, "replaced all-reduce (TrainVerify)",
           _settings(row_parallel_scale=(TP_AVERAGE,))),
    Mutant("missing_dp_average",
           "gradients are summed over dp without the 1/dp of DDP's average",
           "debug", "grad:output", Fraction(DP_SIZE), "loss scaling (B01 class)",
           _settings(grad_scale=())),
    Mutant("missing_grad_accum_scale",
           "the micro-batch loss is not divided by K: the K accumulated gradients sum to K x",
           "debug", "grad:output", Fraction(K), "loss scaling (B05 class)",
           _settings(loss_scale=(LOSS_PREFACTOR,))),
    Mutant("grad_accum_scale_twice",
           "1/K is applied twice (engine and trainer both scale by the micro-batch count)",
           "debug", "grad:output", Fraction(1, K), "loss scaling (B05)",
           _settings(loss_scale=(LOSS_PREFACTOR, GRAD_ACCUM, GRAD_ACCUM))),
    Mutant("replicated_kv_weight_treated_as_shard",
           "replicated wk/wv (1 KV head < tp) do not enter the TP region through copy_to_tp: "
           "their per-rank partial gradient reaches AdamW unreduced",
           "kvrep", "grad:layers.1.attn.wv", None, "replicated-parameter gradient (B12 class)",
           _settings("kvrep", replicated_weights_enter_tp=False)),
    Mutant("norm_eps_on_one_rank",
           "tp rank 1 uses RMSNorm eps 1e-3 instead of 1e-5 (a RANK_CONST)",
           "debug", "loss", None, "per-rank constant (TrainVerify)",
           _rewrite_forward("debug", _eps_on_tp_rank_1)),
    Mutant("attention_scale_on_one_rank",
           "tp rank 1 scales attention scores by 1/HD instead of 1/sqrt(HD)",
           "debug", "loss", None, "per-rank constant (TrainVerify)",
           _rewrite_forward("debug", _attention_scale_on_tp_rank_1)),
    Mutant("kv_split_over_head_dim",
           "the single KV head (kv_heads < tp) is split anyway, along the head dim HD (wq/wk/wv/"
           "wo too): q.k are partial sums over tp that go into softmax unreduced",
           "kvrep", "loss", None, "KV heads split where they must be replicated",
           _kv_split_head_dim),
    Mutant("label_mask_dropped_on_one_rank",
           "dp rank 1 ignores the label mask (every token counts in its loss and token count)",
           "debug", "loss", None, "masking (B03 class)",
           _wrap_forward("debug", _mask_dropped_on_dp_rank_1)),
    Mutant("cross_entropy_max_not_allreduced",
           "vocab-parallel cross-entropy shifts each rank's logits by its local max (no "
           "all-reduce max): the summed exp terms use different shifts",
           "debug", "loss", None, "missing all-reduce (TrainVerify)",
           _rewrite_forward("debug", _local_max_in_cross_entropy)),
    Mutant("rope_cos_sin_swapped",
           "RoPE's cos and sin tables are swapped",
           "debug", "loss", None, "swapped RoPE inputs (TrainVerify)",
           _rewrite_forward("debug", _rope_cos_sin_swapped)),
    Mutant("embedding_allreduce_backward",
           "the vocab-parallel embedding's g is declared with an all-reduce backward: the "
           "replicated gradient is summed again over tp",
           "debug", "grad:tok_embeddings", Fraction(TP_SIZE),
           "duplicated backward gradient input (TrainVerify)",
           _settings(embedding_reduce=("all_reduce", "all_reduce"))),
    Mutant("gathered_logits_reduce_scatter_backward",
           "logits all-gathered over V (parallel_output=False) with a reduce-scatter backward "
           "(SP's pairing) instead of split: every rank's identical gradient is summed over tp",
           "debug", "grad:output", Fraction(TP_SIZE), "wrong declared backward",
           _settings(gather_logits=("all_gather", "reduce_scatter"))),
    Mutant("extra_tp_allreduce_on_norm_grads",
           "norm-weight gradients, already complete on every tp rank, are all-reduced over tp "
           "once more",
           "debug", "grad:norm", Fraction(TP_SIZE),
           "duplicated reduction (B14 class)", _extra_tp_allreduce_on_norm_grads),
    Mutant("grad_allreduce_over_tp_not_dp",
           "the gradient all-reduce runs over the tp group instead of dp (wrong group)",
           "debug", "grad:output", None, "wrong reduction group",
           _settings(grad_reduce_axes=(TP,))),
    Mutant("token_count_not_reduced_over_dp",
           "the token count N is summed over the micro-batches but not over dp: each rank "
           "normalises by its own count",
           "debug", "loss", None, "loss normalisation (B01/B03 class)",
           _settings(token_count_axes=(Axis.MB,))),
    Mutant("token_count_per_microbatch",
           "each micro-batch normalises by its own token count (mean of micro-batch means)",
           "debug", "loss", None, "loss normalisation (B03)",
           _settings(token_count_axes=(DP,))),
)

_BY_ID = {m.id: m for m in MUTANTS}


def build(mutant_id: str) -> tuple[Spec, Plan]:
    """The mutated ``(spec, plan)`` of the row ``mutant_id``."""
    return _BY_ID[mutant_id].make()


# -- bugs the types reject while tracing -------------------------------------------------------------

def _gather_in_place_of_allreduce() -> tuple[Spec, Plan]:
    spec, plan = correct("debug")
    inner = plan.forward

    def exit_tp(self, x, d):
        return gather_from_tp_region(x, d.H, TP)                 # H is not sharded: ill-typed

    def forward(p, data):
        with _patched(MegatronTP, "exit_tp", exit_tp):
            return inner(p, data)
    return spec, replace(plan, forward=forward)


def _split_single_kv_head() -> tuple[Spec, Plan]:
    d = llama(BASES["kvrep"]).dims
    lp = layer_plan(BASES["debug"], TP_SIZE)                     # Shard(KVH) for every projection
    return correct("kvrep", layers={**lp, "attn.wo": {TP: Shard(d.KVH)}})


STATIC_MUTANTS: tuple[tuple[str, str, str, Callable[[], tuple[Spec, Plan]]], ...] = (
    ("allgather_in_place_of_allreduce",
     "row-parallel output all-gathered along H instead of all-reduced",
     "all_gather over 'tp' along H", _gather_in_place_of_allreduce),
    ("split_single_kv_head",
     "one KV head split over tp=2 (Shard(KVH) with kv_heads < tp)",
     "does not divide", _split_single_kv_head),
)
"""(id, description, text the PlanError must contain, builder): rejected at trace time."""


GATHER_LOGITS_SETTINGS = MegatronSettings(gather_logits=GATHER_FROM_TP)
"""The correct parallel_output=False variant (an equivalent plan, tested alongside)."""


def mutant_table() -> str:
    """The markdown table of :data:`MUTANTS` and :data:`STATIC_MUTANTS` (``docs/plans.md``
    embeds it verbatim; a test keeps the two in sync)."""
    lines = ["| id | base | bug | caught at goal | plan / spec | class |",
             "|---|---|---|---|---|---|"]
    for m in MUTANTS:
        ratio = f"{float(m.ratio):.3f}" if m.ratio is not None else "not constant"
        lines.append(f"| `{m.id}` | {m.base} | {m.description} | `{m.goal}` | {ratio} | "
                     f"{m.kind} |")
    for sid, desc, text, _ in STATIC_MUTANTS:
        lines.append(f"| `{sid}` | static | {desc} | PlanError while tracing (\"{text}\") | - | "
                     "rejected by the types |")
    return "\n".join(lines)
