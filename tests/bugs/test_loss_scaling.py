"""CASES.md section 1, loss normalisation and scaling (B01 B03 B05 B07 B09 B10).

Per case: the buggy example is NOT EQUIVALENT with the goal and factor (or differing values), the
fixed one EQUIVALENT with a checked certificate. Then the class is generalised: the same plan
shape with the axis, factor and sizes varied (every scale factor a symbol: ``axis_size``), and
mutants of the Megatron plan on the debug Llama (``spec_lang.plans.megatron``), all decided by
the prover.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from proofs.prover import prove
from spec_lang import (
    SGD, Dim, Loss, Mesh, Plan, Shard, Spec, all_reduce, build_problem, index, load, mask,
    microbatches, ops,
)
from spec_lang.evaluate import evaluate
from spec_lang.models import DEBUG, llama
from spec_lang.optim import AdamW
from spec_lang.plans.megatron import (
    DP_AVERAGE, GRAD_ACCUM, LOSS_PREFACTOR, MegatronSettings, megatron,
)
from tests.bugs.cases import BUGS, assert_certified, assert_refuted

# -- the examples ---------------------------------------------------------------------------------


def test_b01_cp_factor_in_per_token_loss_is_refuted():
    cx = assert_refuted("B01", goal="grad:head", ratio=2.0)   # x cp, cp = 2
    assert "loss" not in cx.others                             # the reported loss is right


def test_b01_fixed_is_certified(tmp_path):
    assert_certified("B01", tmp_path)


def test_b03_mean_of_means_is_refuted():
    # uneven masks: the per-token weights differ, so the loss and every gradient diverge
    assert_refuted("B03", goal="loss")


def test_b03_fixed_is_certified(tmp_path):
    assert_certified("B03", tmp_path)


def test_b05_engine_one_over_k_is_refuted():
    cx = assert_refuted("B05", goal="grad:head", ratio=0.5)   # 1/K, K = 2
    assert "loss" not in cx.others                             # only the backward seed is scaled


def test_b05_fixed_is_certified(tmp_path):
    assert_certified("B05", tmp_path)


def test_b09_sample_share_times_token_mean_is_refuted():
    cx = assert_refuted("B09", goal="loss")
    assert "not a simple factor" in cx.render()                # weights, not one factor
    assert {"grad:head", "grad:emb"} <= set(cx.others)


def test_b09_fixed_is_certified(tmp_path):
    assert_certified("B09", tmp_path)


def test_b10_prefactor_vs_averaging_group_is_refuted():
    cx = assert_refuted("B10", goal="loss", ratio=0.5)         # 1/sp, sp = 2
    assert {"grad:head", "grad:emb"} <= set(cx.others)


def test_b10_fixed_is_certified(tmp_path):
    assert_certified("B10", tmp_path)


# -- the per-token weights of CASES.md, on concrete inputs ----------------------------------------

def _loss_values(case: str, inputs: dict[str, np.ndarray]) -> tuple[float, np.ndarray]:
    """(spec loss, plan loss on every rank) of examples/bugs/<case>.py at real sizes."""
    pb = load(BUGS / f"{case}.py")
    g = next(g for g in pb.goals if g.name == "loss")
    v = evaluate([g.expected, g.actual], pb.binding, inputs)
    return float(np.asarray(v[g.expected].data).reshape(-1)[0]), np.asarray(v[g.actual].data)


def _ce(inputs: dict[str, np.ndarray]) -> np.ndarray:
    """Per-token cross-entropy of the one-linear-layer model: (B, S)."""
    logits = inputs["emb"][inputs["tokens"].astype(int)] @ inputs["head"]
    m = logits.max(-1, keepdims=True)
    lse = (m + np.log(np.exp(logits - m).sum(-1, keepdims=True)))[..., 0]
    return lse - np.take_along_axis(logits, inputs["labels"].astype(int)[..., None], -1)[..., 0]


def _model_inputs(b: int, s: int, rng) -> dict[str, np.ndarray]:
    return {"emb": rng.standard_normal((8, 4)), "head": rng.standard_normal((4, 8)),
            "tokens": rng.integers(0, 8, (b, s)).astype(float),
            "labels": rng.integers(0, 8, (b, s)).astype(float)}


def test_b03_weights_half_and_sixth_for_lengths_1_and_3():
    inp = _model_inputs(2, 4, np.random.default_rng(7))
    inp["mask"] = np.array([[1, 0, 0, 0], [1, 1, 1, 0]], float)
    ce = _ce(inp)
    w_plan = np.array([[1 / 2, 0, 0, 0], [1 / 6, 1 / 6, 1 / 6, 0]])
    spec, plan = _loss_values("B03_buggy", inp)
    assert spec == pytest.approx((ce * inp["mask"]).sum() / 4, rel=1e-12)
    assert plan.reshape(-1) == pytest.approx(np.full(plan.size, (ce * w_plan).sum()), rel=1e-12)
    assert abs(spec - plan.reshape(-1)[0]) > 1e-3
    spec_f, plan_f = _loss_values("B03_fixed", inp)
    assert plan_f.reshape(-1) == pytest.approx(np.full(plan_f.size, spec_f), rel=1e-12)


@pytest.mark.parametrize("present, mask_, w_plan", [
    # CASES.md: one sample per micro-batch, lengths 1 and 3: weights 1/2 and 1/6 (spec 1/4)
    ([1, 0, 1, 0], [[1, 0, 0, 0], [0] * 4, [1, 1, 1, 0], [0] * 4],
     [[1 / 2, 0, 0, 0], [0] * 4, [1 / 6] * 3 + [0], [0] * 4]),
    # equal token counts do not hide it: 2 one-token samples vs 1 two-token sample: 1/3, 1/6
    ([1, 1, 1, 0], [[1, 0, 0, 0], [1, 0, 0, 0], [1, 1, 0, 0], [0] * 4],
     [[1 / 3, 0, 0, 0], [1 / 3, 0, 0, 0], [1 / 6, 1 / 6, 0, 0], [0] * 4]),
])
def test_b09_weights_follow_the_sample_partition(present, mask_, w_plan):
    inp = _model_inputs(4, 4, np.random.default_rng(3))
    inp["present"], inp["mask"] = np.array(present, float), np.array(mask_, float)
    ce = _ce(inp)
    w = inp["mask"] * inp["present"][:, None]
    spec, plan = _loss_values("B09_buggy", inp)
    assert spec == pytest.approx((ce * w).sum() / 4, rel=1e-12)
    assert plan.reshape(-1)[0] == pytest.approx((ce * np.array(w_plan)).sum(), rel=1e-12)
    assert abs(spec - plan.reshape(-1)[0]) > 1e-3
    spec_f, plan_f = _loss_values("B09_fixed", inp)
    assert plan_f.reshape(-1)[0] == pytest.approx(spec_f, rel=1e-12)


# -- the class, generalised: one linear layer, scale factors as plan data ---------------------------

B, S, H, V = Dim("B", 4), Dim("S", 4), Dim("H", 4), Dim("V", 8)


def _token_loss_sum(p, d):
    x = ops.embedding(d["tokens"], p["emb"], V)
    logits = ops.einsum(x, p["head"], out=(B, S, V))
    return ops.sum(d["mask"] * ops.cross_entropy_per_token(logits, d["labels"], V))


SPEC = Spec(params={"emb": (V, H), "head": (H, V)},
            data={"tokens": index(B, S, range=V), "labels": index(B, S, range=V),
                  "mask": mask(B, S)},
            forward=lambda p, d: _token_loss_sum(p, d) / ops.sum(d["mask"]), optimizer=SGD())


def _size(axes: tuple[str, ...]):
    out = ops.const(1)
    for a in axes:
        out = out * ops.axis_size(a)
    return out


def scaled_plan(mesh: dict[str, int], shard: dict[str, str], *, k: int | None = None,
                seed_factor: tuple[tuple[str, ...], tuple[str, ...]] = ((), ()),
                grad_factor: tuple[tuple[str, ...], tuple[str, ...]] = ((), ()),
                count_axes: tuple[str, ...] | None = None) -> Plan:
    """Every rank backprops ``seed_factor * S_r / N``; gradients are summed over every mesh axis
    and scaled by ``grad_factor``; factors are (numerator axes, denominator axes) of sizes.
    ``N`` is all-reduced over ``count_axes`` (default: every axis, and ``mb``). Correct iff the
    two factors cancel and ``N`` is global."""
    axes = tuple(mesh) + (("mb",) if k else ())
    count = axes if count_axes is None else count_axes
    pl = {a: Shard(dim) for a, dim in shard.items()}

    def reduce_all(x):
        for a in mesh:
            x = all_reduce(x, a)
        return x

    def forward(p, d):
        s_local = _token_loss_sum(p, d)
        n = ops.sum(d["mask"])
        for a in count:
            n = all_reduce(n, a)
        seed = _size(seed_factor[0]) / _size(seed_factor[1]) * s_local / n
        return Loss(backward=seed, report=reduce_all(s_local) / n)

    return Plan(mesh=Mesh(**mesh), placements={x: pl for x in ("tokens", "labels", "mask")},
                forward=forward,
                reduce_grads=lambda n, g: _size(grad_factor[0]) / _size(grad_factor[1])
                * reduce_all(g),
                microbatches=microbatches(k, B) if k else None)


def _prove(plan: Plan, spec: Spec = SPEC):
    return prove(build_problem(spec, plan), timeout_s=60)


# (mesh, shard, k, seed factor, grad factor, expected gradient ratio): the seed factor is left
# in the per-token path (B01), inserted by the engine (B05), or cancelled by an averaging group of
# the wrong size (B10).
FACTOR_BUGS = [
    pytest.param({"dp": 1, "cp": 2}, {"cp": "S"}, None, (("cp",), ()), ((), ()), 2.0, id="B01-cp2"),
    pytest.param({"dp": 2, "cp": 2}, {"dp": "B", "cp": "S"}, None, (("cp",), ()), ((), ()), 2.0,
                 id="B01-dp2xcp2"),
    pytest.param({"cp": 4}, {"cp": "S"}, None, (("cp",), ()), ((), ()), 4.0, id="B01-cp4"),
    pytest.param({"dp": 2, "cp": 2}, {"dp": "B", "cp": "S"}, None, (("dp", "cp"), ()), ((), ()),
                 4.0, id="B01-dpxcp-factor"),
    pytest.param({"sp": 2}, {"sp": "S"}, None, (("sp",), ()), ((), ()), 2.0, id="B01-sp2"),
    pytest.param({"dp": 1}, {}, 2, ((), ("mb",)), ((), ()), 0.5, id="B05-K2"),
    pytest.param({"dp": 1}, {}, 4, ((), ("mb",)), ((), ()), 0.25, id="B05-K4"),
    pytest.param({"dp": 2}, {"dp": "B"}, 2, ((), ("mb",)), ((), ()), 0.5, id="B05-dp2-K2"),
    pytest.param({"dp": 2, "sp": 2}, {"dp": "B", "sp": "S"}, None, (("dp",), ()),
                 ((), ("dp", "sp")), 0.5, id="B10-dp2xsp2"),
    pytest.param({"dp": 1, "sp": 4}, {"sp": "S"}, None, (("dp",), ()), ((), ("dp", "sp")), 0.25,
                 id="B10-sp4"),
    pytest.param({"dp": 2, "cp": 2}, {"dp": "B", "cp": "S"}, None, (("dp",), ()),
                 ((), ("dp", "cp")), 0.5, id="B10-cp-variant"),
    pytest.param({"dp": 2}, {"dp": "B"}, 2, (("dp",), ()), ((), ("dp", "mb")), 0.5,
                 id="B10-mb-in-group"),
]


@pytest.mark.parametrize("mesh, shard, k, seed_f, grad_f, ratio", FACTOR_BUGS)
def test_factor_bugs_are_refuted_with_the_factor(mesh, shard, k, seed_f, grad_f, ratio):
    r = _prove(scaled_plan(mesh, shard, k=k, seed_factor=seed_f, grad_factor=grad_f))
    assert r.verdict == "NOT EQUIVALENT"
    cx = r.counterexample
    assert cx.goal.startswith("grad:"), cx.goal
    assert cx.ratio == pytest.approx(ratio, rel=1e-6), cx.render()


@pytest.mark.parametrize("mesh, shard, k, seed_f, grad_f", [
    ({"dp": 2, "cp": 2}, {"dp": "B", "cp": "S"}, None, ((), ()), ((), ())),
    ({"cp": 4}, {"cp": "S"}, None, ((), ()), ((), ())),
    ({"dp": 2}, {"dp": "B"}, 2, ((), ()), ((), ())),
    ({"dp": 2, "sp": 2}, {"dp": "B", "sp": "S"}, None, (("dp", "sp"), ()), ((), ("dp", "sp"))),
    ({"dp": 2}, {"dp": "B"}, 2, (("dp", "mb"), ()), ((), ("dp", "mb"))),
])
def test_cancelling_factors_are_proved(mesh, shard, k, seed_f, grad_f):
    r = _prove(scaled_plan(mesh, shard, k=k, seed_factor=seed_f, grad_factor=grad_f))
    assert r.verdict == "EQUIVALENT", [(g.name, g.reason) for g in r.open_goals]


# mean of means (B03, B09): the normaliser N counted over fewer axes than the data is split over
@pytest.mark.parametrize("mesh, shard, k, count_axes", [
    pytest.param({"dp": 1}, {}, 2, (), id="mb-local-N"),
    pytest.param({"dp": 1}, {}, 4, (), id="mb4-local-N"),
    pytest.param({"cp": 2}, {"cp": "S"}, None, (), id="cp-local-N"),
    pytest.param({"dp": 2}, {"dp": "B"}, 2, ("mb",), id="dp-local-N"),
    pytest.param({"dp": 2, "cp": 2}, {"dp": "B", "cp": "S"}, None, ("dp",), id="cp-missing"),
])
def test_mean_of_means_is_refuted_with_differing_values(mesh, shard, k, count_axes):
    # each rank / micro-batch normalises by its own count; the grad factor averages the means
    n_ranks = tuple(mesh) + (("mb",) if k else ())
    missing = tuple(a for a in n_ranks if a not in count_axes)
    r = _prove(scaled_plan(mesh, shard, k=k, count_axes=count_axes,
                           grad_factor=((), missing)))
    assert r.verdict == "NOT EQUIVALENT"
    cx = r.counterexample
    assert cx.ratio is None or not math.isclose(cx.ratio, 1.0)
    assert any(abs(s - p) > 1e-9 * max(1.0, abs(s)) for _, s, p in cx.values)


# -- mutants of the Megatron plan on the debug Llama (TP x DP x micro-batches) ----------------------

LLAMA = llama(DEBUG)


@pytest.mark.parametrize("settings, goal, ratio", [
    # B05's mirror: Megatron's 1/K dropped while the dp*K pre-factor stays: x K
    pytest.param(MegatronSettings(loss_scale=(LOSS_PREFACTOR,)), "grad:", 2.0, id="no-1/K"),
    # B05: an engine 1/K on top of Megatron's own: 1/K
    pytest.param(MegatronSettings(loss_scale=(LOSS_PREFACTOR, GRAD_ACCUM, GRAD_ACCUM)), "grad:",
                 0.5, id="1/K-twice"),
    # B10: pre-factor dp*K kept, DDP's 1/dp averaging dropped: x dp
    pytest.param(MegatronSettings(grad_scale=()), "grad:", 2.0, id="no-1/dp"),
    # B10: the averaging group counted twice: 1/dp
    pytest.param(MegatronSettings(grad_scale=(DP_AVERAGE, DP_AVERAGE)), "grad:", 0.5,
                 id="1/dp-twice"),
    # B03 / B09: N counted per dp rank (mean of means over dp) or per micro-batch
    pytest.param(MegatronSettings(token_count_axes=("mb",)), "loss", None, id="N-per-dp-rank"),
    pytest.param(MegatronSettings(token_count_axes=("dp",)), "loss", None, id="N-per-microbatch"),
])
def test_megatron_scaling_mutants_are_refuted(settings, goal, ratio):
    plan = megatron(LLAMA, tp=2, dp=2, microbatches=2, settings=settings)
    r = prove(build_problem(LLAMA.spec(AdamW()), plan), timeout_s=60)
    assert r.verdict == "NOT EQUIVALENT"
    cx = r.counterexample
    assert cx.goal.startswith(goal), cx.goal
    if ratio is not None:
        assert cx.ratio == pytest.approx(ratio, rel=1e-6), cx.render()
    else:
        assert cx.ratio is None or not math.isclose(cx.ratio, 1.0)
