"""CASES2.md B75 (floating point only) and the precision class on explicit schedules.

B75: FSDP2 + TP, the TP Partial -> Replicate gradient all-reduce in bf16 despite
``reduce_dtype=fp32``. Over the reals both plans are EQUIVALENT (a cast is the identity); the
precision lint flags the buggy one. The class: a bf16 communication dtype on a schedule's own
buffer collectives (``collective(..., dtype=)`` / ``reduce_scatter(..., dtype=)``) and a bf16
buffer in an explicit event order (``Accumulation(accum_dtype=)`` / ``Pipeline(accum_dtype=)``),
which ``microbatches(accum_dtype=)`` could not express for a plan without micro-batching.
"""

from __future__ import annotations

import pytest

from proofs.precision import lint
from proofs.prover import prove
from spec_lang import (
    SGD, Axis, Dim, Loss, Mesh, Plan, Shard, Spec, all_reduce, build_problem, load, ops, real,
)
from spec_lang.pipeline import Accumulation
from spec_lang.schedules import B, F, collective
from tests.bugs.cases import BUGS, assert_certified

torch = pytest.importorskip("torch")
DP = Axis.DP


def test_b75_numbers_bf16_tp_reduction_loses_a_contribution():
    g = [1 + 2 ** -8, 2 ** -8]                       # the two tp ranks' partial gradients
    fp32 = torch.tensor(g, dtype=torch.float32).sum()
    bf16 = torch.tensor(g).to(torch.bfloat16).sum(dtype=torch.bfloat16)
    assert (fp32.item(), bf16.item()) == (1 + 2 ** -7, 1.0)


@pytest.mark.parametrize("suffix", ["_buggy", "_fixed"])
def test_b75_both_plans_are_equivalent_over_the_reals(tmp_path, suffix):
    assert_certified("B75", tmp_path, suffix=suffix)


def test_b75_lint_flags_the_bf16_tp_all_reduce_only():
    bad = lint(load(BUGS / "B75_buggy.py"))
    assert len(bad) == 1 and bad[0].dtype == "bf16" and "all_reduce over tp" in bad[0].collective
    assert bad[0].site.endswith("B75_buggy.py:43")
    assert lint(load(BUGS / "B75_fixed.py")) == []


# -- the class on an explicit accumulation schedule --------------------------------------------

def _accumulation(**kw):
    """dp = 2, two micro-batches, the dp all-reduce as the schedule's own last event."""
    Bd, H = Dim("B", 4), Dim("H", 2)
    spec = Spec(params={"w": (H,)}, data={"x": real(Bd, H)},
                forward=lambda p, d: ops.sum(p["w"] * d["x"]) / ops.dim_size(Bd), optimizer=SGD())

    def forward(p, d):
        local = ops.sum(p["w"] * d["x"]) / ops.dim_size(Bd)
        return Loss(backward=local, report=all_reduce(local, DP))

    events = [F(0), B(0), F(1), B(1), collective(DP, "sum", dtype=kw.pop("comm", None))]
    from spec_lang import microbatches
    plan = Plan(mesh=Mesh(dp=2), placements={"x": {DP: Shard(Bd)}}, forward=forward,
                microbatches=microbatches(2, Bd),
                schedule=Accumulation(events, 2, accum_dtype=kw.pop("accum", None)))
    return build_problem(spec, plan)


@pytest.mark.parametrize("kw,flag", [({}, False), ({"comm": "bf16"}, True),
                                     ({"accum": "bf16"}, True), ({"comm": "fp32"}, False)])
def test_schedule_dtypes_are_linted_and_proved(kw, flag):
    pr = _accumulation(**kw)
    assert prove(pr, timeout_s=60).verdict == "EQUIVALENT"
    found = lint(pr)
    assert bool(found) == flag, [f.render() for f in found]
    if flag:
        assert all(f.dtype == "bf16" for f in found)


def test_schedule_dtype_names_are_checked():
    from spec_lang.errors import PlanError
    with pytest.raises(PlanError, match="not a known floating dtype"):
        collective(DP, "sum", dtype="bf61")
    with pytest.raises(PlanError, match="accum_dtype='fp7'"):
        Accumulation([F(0), B(0)], 1, accum_dtype="fp7")
