"""CASES.md section 9, floating point (B36, B38): the proof says EQUIVALENT (right over the
reals) and ``prove --precision-lint`` flags reductions narrower than fp32 around collectives.

The torch bf16 demonstrations show that each flagged site changes real values.
"""

from __future__ import annotations

import runpy
from pathlib import Path

import pytest

from proofs.cli import prove_main
from proofs.precision import Finding, dtype_width, lint
from spec_lang import (
    SGD, Axis, Dim, Loss, Mesh, Plan, Shard, Spec, all_reduce, build_problem, load,
    microbatches, ops, real, reduce_from_tp_region, reduce_scatter_to_sp_region,
)
from tests.bugs.cases import BUGS, assert_certified

torch = pytest.importorskip("torch")

ROOT = Path(__file__).resolve().parents[2]
DP, TP = Axis.DP, Axis.TP


def findings(name: str) -> list[Finding]:
    return lint(load(BUGS / f"{name}.py"))


def line_of(name: str, needle: str) -> int:
    lines = (BUGS / f"{name}.py").read_text().splitlines()
    return next(i for i, s in enumerate(lines, 1) if needle in s)


# -- the torch numbers of CASES.md -------------------------------------------------------------------
def test_b36_numbers_bf16_reduction_loses_the_small_gradient():
    g = [1 + 2 ** -8, 2 ** -8]                                  # per-rank fp32 gradients
    fp32 = torch.tensor(g, dtype=torch.float32).sum()
    bf16 = torch.tensor(g, dtype=torch.float32).to(torch.bfloat16).sum(dtype=torch.bfloat16)
    assert fp32.item() == 1 + 2 ** -7
    assert bf16.item() == 1.0                                  # 1 + 2^-8 rounds to 1 (ties-to-even)


def test_b38_numbers_cast_before_all_reduce():
    a = torch.tensor([1, 2 ** -4, 2 ** -4, 0], dtype=torch.float32)
    p0, p1 = (a[:2] * a[:2]).sum(), (a[2:] * a[2:]).sum()      # tp = 2, K split 2|2
    assert (p0.item(), p1.item()) == (1 + 2 ** -8, 2 ** -8)
    spec = (a * a).sum().to(torch.bfloat16)                    # fp32 accumulation, one rounding
    fixed = (p0 + p1).to(torch.bfloat16)                       # fp32 all-reduce, then cast
    buggy = p0.to(torch.bfloat16) + p1.to(torch.bfloat16)      # bf16 all-reduce
    assert spec.item() == fixed.item() == 1.0078125
    assert buggy.item() == 1.0


# -- B36 / B38: proof EQUIVALENT on both, lint FLAG on buggy, PASS on fixed --------------------------
@pytest.mark.parametrize("case", ["B36", "B38"])
def test_proof_is_equivalent_for_buggy_and_fixed(case, tmp_path):
    assert_certified(case, tmp_path, suffix="_buggy")
    assert_certified(case, tmp_path, suffix="_fixed")


def test_b36_lint_flags_the_embedding_gradient_reduce_scatter():
    (f,) = findings("B36_buggy")
    line = line_of("B36_buggy", "# the bug")
    assert f.site.endswith(f"B36_buggy.py:{line}") and f.cast_site.endswith(f":{line}")
    assert (f.collective, f.dtype, f.minimum, f.tensor) == (
        "reduce_scatter over dp along V", "bf16", "fp32", "(V, H)")
    assert f.goals == ("grad:tok_embeddings", "tok_embeddings")
    assert findings("B36_fixed") == []


def test_b38_lint_flags_the_cast_before_the_tp_all_reduce():
    (f,) = findings("B38_buggy")
    line = line_of("B38_buggy", "the bug")
    assert f.site.endswith(f"B38_buggy.py:{line}")
    assert (f.collective, f.dtype, f.tensor) == ("all_reduce over tp", "bf16", "(B, N)")
    assert findings("B38_fixed") == []


def test_cli_precision_lint_exit_codes(capsys):
    buggy, fixed = str(BUGS / "B38_buggy.py"), str(BUGS / "B38_fixed.py")
    assert prove_main([buggy, "--precision-lint"]) == 0          # findings do not change the verdict
    out = capsys.readouterr().out
    assert "precision lint: 1 finding(s)" in out and "all_reduce over tp reduces (B, N) in bf16" in out
    assert prove_main([buggy, "--precision-lint=error"]) == 4    # =error: EQUIVALENT + findings
    assert prove_main([fixed, "--precision-lint=error"]) == 0
    assert "precision lint: PASS" in capsys.readouterr().out
    assert prove_main([str(BUGS / "B35_buggy.py"), "--precision-lint=error"]) == 1  # verdict wins


def test_dtype_widths():
    assert dtype_width("bf16") < dtype_width("fp16") < dtype_width("fp32") < dtype_width("fp64")
    assert dtype_width("torch.bfloat16") == dtype_width("bf16")
    with pytest.raises(ValueError, match="unknown dtype"):
        dtype_width("fp12")


# -- mutants on other plans ----------------------------------------------------------------------------
def _debug_plan(path: str) -> dict:
    return runpy.run_path(str(ROOT / path))


def test_mutant_llama_tp_row_parallel_cast_before_all_reduce():
    """Debug Llama, Megatron TP x DP x mb: exit_tp casts the row-parallel partial to bf16 before
    reduce_from_tp_region: one finding per wo and w2 of each layer (2 layers)."""
    m = _debug_plan("tests/spec_lang/plans/debug_tp_dp.py")

    class Bf16Exit(m["MegatronTP"]):
        def exit_tp(self, x, d):
            return reduce_from_tp_region(ops.cast(x, "bf16"), TP)

    good = m["plan"]
    assert lint(build_problem(m["spec"], good)) == []
    bad = Plan(mesh=good.mesh, placements=good.placements, reduce_grads=good.reduce_grads,
               microbatches=good.microbatches,
               forward=lambda p, data: Loss(backward=(s := m["model"].forward(p, data, Bf16Exit())),
                                            report=all_reduce(s, DP)))
    fs = lint(build_problem(m["spec"], bad))
    assert len(fs) == 4 and {f.collective for f in fs} == {"all_reduce over tp"}
    assert all(f.dtype == "bf16" and "test_precision.py" in f.site for f in fs), [f.site for f in fs]


def test_mutant_llama_sp_reduce_scatter_in_bf16():
    m = _debug_plan("tests/spec_lang/plans/debug_tp_sp.py")

    class Bf16Scatter(m["MegatronSP"]):
        def exit_tp(self, x, d):
            return reduce_scatter_to_sp_region(ops.cast(x, "fp16"), d.S, TP)

    good = m["plan"]
    assert lint(build_problem(m["spec"], good)) == []
    bad = Plan(mesh=good.mesh, placements=good.placements, reduce_grads=good.reduce_grads,
               forward=lambda p, data: m["model"].forward(p, data, Bf16Scatter()))
    fs = lint(build_problem(m["spec"], bad))
    assert len(fs) == 4 and {(f.collective, f.dtype) for f in fs} == {
        ("reduce_scatter over tp along S", "fp16")}


B, H, O = Dim("B", 4), Dim("H", 2), Dim("O", 2)


def _dp_problem(reduce, mb=None):
    spec = Spec(params={"w": (H, O)}, data={"x": real(B, H), "t": real(B, O)},
                forward=lambda p, d: ops.sum(ops.einsum(d["x"], p["w"], out=(B, O)) * d["t"]),
                optimizer=SGD())

    def forward(p, d):
        local = ops.sum(ops.einsum(d["x"], p["w"], out=(B, O)) * d["t"])
        return Loss(backward=local, report=all_reduce(local, DP))

    plan = Plan(mesh=Mesh(dp=2), forward=forward, reduce_grads=reduce, microbatches=mb,
                placements={"x": {DP: Shard(B)}, "t": {DP: Shard(B)}})
    return build_problem(spec, plan)


@pytest.mark.parametrize("reduce,mb,expect", [
    (lambda n, g: all_reduce(g, DP), None, None),
    (lambda n, g: all_reduce(g, DP, dtype="fp32"), None, None),
    (lambda n, g: all_reduce(g, DP, dtype="fp16"), None, {("all_reduce over dp", "fp16")}),
    (lambda n, g: all_reduce(ops.cast(ops.cast(g, "bf16"), "fp32"), DP), None,
     {("all_reduce over dp", "bf16 (rounded, widened again)")}),
    # the bf16 buffer: the accumulation over mb and the dp all-reduce of the bf16 buffer
    (lambda n, g: all_reduce(g, DP), microbatches(2, B, accum_dtype="bf16"),
     {("accumulation over mb (micro-batch gradient buffer)", "bf16"),
      ("all_reduce over dp", "bf16")}),
    (lambda n, g: all_reduce(g, DP), microbatches(2, B, accum_dtype="fp32"), None),
], ids=["fp32", "fp32-explicit", "fp16-comm", "bf16-widened-again", "bf16-accum-buffer",
        "fp32-accum-buffer"])
def test_mutant_dp_gradient_reduction_dtypes(reduce, mb, expect):
    fs = lint(_dp_problem(reduce, mb))
    if expect is None:
        assert fs == []
    else:
        assert {(f.collective, f.dtype) for f in fs} == expect, fs
        assert all(f.goals[0] == "grad:w" and "test_precision.py" in f.site for f in fs), fs


def test_bf16_products_accumulated_in_fp32_pass():
    """Mixed precision: bf16 operands in the forward, gradients accumulated by a contraction (in
    fp32) before the fp32 all-reduce: no finding (the cast sits below a contraction)."""
    spec = Spec(params={"w": (H, O)}, data={"x": real(B, H), "t": real(B, O)},
                forward=lambda p, d: ops.sum(ops.einsum(d["x"], p["w"], out=(B, O)) * d["t"]),
                optimizer=SGD())

    def forward(p, d):
        y = ops.einsum(ops.cast(d["x"], "bf16"), ops.cast(p["w"], "bf16"), out=(B, O))
        local = ops.sum(ops.cast(y, "fp32") * d["t"])
        return Loss(backward=local, report=all_reduce(local, DP))

    plan = Plan(mesh=Mesh(dp=2), forward=forward, reduce_grads=lambda n, g: all_reduce(g, DP),
                placements={"x": {DP: Shard(B)}, "t": {DP: Shard(B)}})
    pr = build_problem(spec, plan)
    assert any(t.op.name == "CAST" for g in pr.goals for t in _walk(g.actual))
    assert lint(pr) == []


def _walk(t):
    from spec_lang.term import walk

    return walk([t])
