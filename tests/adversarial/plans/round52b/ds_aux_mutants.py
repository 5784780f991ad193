"""Round 52b: DeepSeek-V3 (debug size, Mesh(dp=2)) balance-loss mutants aimed at the per-layer
``layers.N.moe.aux`` cut (built on tests/spec_lang/plans/deepseek_debug_dp.py).

``build(mutant)`` patches spec_lang.models.deepseek only while the *plan's* forward runs:

* ``alpha2``: the plan weights the balance loss 2e-4 (spec 1e-4);
* ``local_mean``: each layer's per-sequence losses averaged over the local batch (x dp);
* ``local_mean_one``: the same in the first MoE layer only;
* ``mtp_aux_dropped`` / ``mtp_aux_doubled``: the MTP module's balance loss left out / twice;
* ``biased_topk_one``: the first MoE layer's aux counts the router's biased, group-limited
  selection instead of ``TopK(s)``;
* ``swap_first_two``: the first MoE layer's aux counted twice, the second's dropped, the
  boundary names kept (layer 2's point carries layer 1's losses);
* ``probs_stopgrad_one``: the first MoE layer's aux with ``stop_gradient`` on the scores (the
  loss value right, the router's gradient through the balance loss lost);
* ``swap_names``: layers 1 and 2 aux boundary names swapped, values right (EQUIVALENT).
"""

from __future__ import annotations

import contextlib
import dataclasses
from fractions import Fraction

import sys

import spec_lang.models.deepseek  # noqa: F401

ds = sys.modules["spec_lang.models.deepseek"]
from spec_lang import SGD, Axis, Loss, Mesh, Plan, Shard, all_reduce, ops
from spec_lang.models.deepseek import DEEPSEEK_DEBUG, DeepSeekContext, deepseek, deepseek_forward

DP = Axis.DP
MUTANTS = ("alpha2", "local_mean", "local_mean_one", "mtp_aux_dropped", "mtp_aux_doubled",
           "biased_topk_one", "swap_first_two", "probs_stopgrad_one", "swap_names")


@contextlib.contextmanager
def _patched(mutant):
    orig_aux, orig_router, orig_head = ds.sequence_aux_loss, ds.router, ds.deepseek_head
    st = {"n": 0, "m": None, "first": None}

    def router(*a, **k):
        g, m, probs = orig_router(*a, **k)
        st["m"] = m
        return g, m, probs

    def aux(m, probs, c, d, ctx, boundary=None):
        st["n"] += 1
        n = st["n"]
        if mutant == "biased_topk_one" and n == 1:
            m = st["m"]
        if mutant == "probs_stopgrad_one" and n == 1:
            probs = ops.stop_gradient(probs)
        if mutant == "swap_names" and n in (1, 2):
            boundary = boundary.replace(f"layers.{n}.", f"layers.{3 - n}.")
        out = orig_aux(m, probs, c, d, ctx, boundary)
        if mutant == "local_mean" or (mutant == "local_mean_one" and n == 1):
            out = out * 2
        if mutant == "swap_first_two":
            if n == 1:
                st["first"] = out
            elif n == 2:
                out = st["first"]
        return out

    def head(*a, **k):
        main, mtp, a_ = orig_head(*a, **k)
        if mutant == "mtp_aux_dropped":
            a_ = a_ * 0
        elif mutant == "mtp_aux_doubled":
            a_ = a_ * 2
        return main, mtp, a_

    ds.sequence_aux_loss, ds.router, ds.deepseek_head = aux, router, head
    try:
        yield
    finally:
        ds.sequence_aux_loss, ds.router, ds.deepseek_head = orig_aux, orig_router, orig_head


def build(mutant: str, config=DEEPSEEK_DEBUG):
    """``(spec, plan)`` of the named mutant (module docstring)."""
    assert mutant in MUTANTS, mutant
    model = deepseek(config)
    d = model.dims
    spec = model.spec(SGD())
    plan_cfg = config
    if mutant == "alpha2":
        plan_cfg = dataclasses.replace(config, aux_loss_alpha=Fraction(2, 10**4))
    plan_model = deepseek(plan_cfg)

    class DataParallel(DeepSeekContext):
        def loss(self, logits, labels, mask, d):
            ce = ops.cross_entropy_per_token(logits, labels, d.V)
            return ops.sum(mask * ce) / all_reduce(ops.sum(mask), DP)

    def forward(p, data):
        with _patched(mutant):
            seed = plan_model.objective(*deepseek_forward(p, data, plan_cfg, d, DataParallel()))
        return Loss(backward=seed, report=all_reduce(seed, DP))

    plan = Plan(mesh=Mesh(dp=2),
                placements={k: {DP: Shard(d.B)} for k in ("tokens", "labels", "mask")},
                forward=forward, reduce_grads=lambda name, g: all_reduce(g, DP))
    return spec, plan
