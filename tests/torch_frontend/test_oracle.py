"""The independent numeric oracle against ``prove --torch`` (issue 11 item 7).

``oracle.run_oracle`` runs every rank of the file's mesh with ``LocalTensorMode`` on real
float64 values and compares each output the front end states a goal for with the single-device
run, through the output's placement. Equal plans agree to a float64 tolerance; refuted plans
show the factor ``prove`` reported at the goal and rank of its counterexample.

CI runs the MLP pair (one child process, ~5 CPU s, ~17 s wall on two shared cores): the right DDP agrees to 1e-12, the
sum-instead-of-average twin shows the factor 2 = |dp| that ``test_examples`` asserts ``prove``
reports. The comparisons with a fresh ``prove --torch`` run (25-60 s a file) are ``slow``.
"""

from __future__ import annotations

import re

import pytest

from tests.torch_frontend.oracle import OracleReport, factor_of, run_oracle
from tests.torch_frontend.test_examples import BUGGY, EX, _prove

ATOL = 1e-10          # float64 over a two-layer step of values of order 1 (measured: <= 1e-15)


def _ok(r: OracleReport | str) -> OracleReport:
    assert isinstance(r, OracleReport), r
    return r


def test_factor_of_recovers_a_scaling_and_refuses_a_non_scaling():
    assert factor_of([2.0, -4.0, 6.0], [1.0, -2.0, 3.0]) == pytest.approx(2.0, abs=1e-15)
    assert factor_of([2.0, -4.0, 6.1], [1.0, -2.0, 3.0]) is None
    assert factor_of([0.0, 0.0], [0.0, 0.0]) is None


def test_the_mlp_pair_agrees_and_shows_the_dp_factor_prove_reports():
    """``mlp_ddp.py`` (EQUIVALENT): every goal's value on both ranks within ``ATOL`` of the
    single-device run. ``mlp_ddp_sum_buggy.py`` (NOT EQUIVALENT, ``plan = 2.000 x spec:
    2 = |dp|`` in ``test_examples.BUGGY``): both gradients exactly twice the spec's on both
    ranks; the SGD updates differ by lr x gradient."""
    right, buggy = run_oracle(EX / "mlp_ddp.py", EX / "mlp_ddp_sum_buggy.py")
    right, buggy = _ok(right), _ok(buggy)
    assert right.ranks == ("dp=0", "dp=1")
    # the goals prove states: 2 gradients + 2 updated weights (the loss varies over dp)
    assert set(right.compared()) == {"grad:w1.weight", "grad:w2.weight", "w1.weight",
                                     "w2.weight"}
    assert right.outputs["loss"].varies
    assert right.max_diff() <= ATOL
    assert all(o.scale > 1e-3 for o in right.compared().values())   # not trivially zero
    reported = next(b for b in BUGGY if b[0] == "mlp_ddp_sum_buggy.py")[3]   # "2 = |dp|"
    want = float(reported.split("=")[0])
    for g in ("grad:w1.weight", "grad:w2.weight"):
        o = buggy.outputs[g]
        assert set(o.factor) == {"dp=0", "dp=1"}
        for f in o.factor.values():
            assert f is not None and f == pytest.approx(want, abs=1e-12)
    for w in ("w1.weight", "w2.weight"):
        lr_grad = 0.1 * right.outputs[f"grad:{w}"].scale
        assert buggy.outputs[w].max_diff == pytest.approx(lr_grad, rel=1e-9)


@pytest.mark.slow
def test_data_parallel_wrappers_are_refused_not_compared():
    """FSDP2 / ``replicate`` cannot run under LocalTensorMode in torch 2.13: a clear refusal."""
    (r,) = run_oracle(EX / "gpt2_ddp.py")
    assert isinstance(r, str) and r.startswith("OracleUnsupported:") and "replicate" in r


# --- against a fresh prove --torch run (slow: 25-60 s per file) --------------------------------

RIGHT = ["mlp_ddp.py", "llama_tp.py"]
REFUTED = ["mlp_ddp_sum_buggy.py", "llama_tp_norm_not_sp_buggy.py",
           "llama_tp_output_layouts_buggy.py", "llama_tp_local_clip_buggy.py"]


def _rank_key(rank: dict | None, ranks: tuple[str, ...]) -> list[str]:
    if not rank:
        return list(ranks)
    want = ",".join(f"{a}={i}" for a, i in rank.items())
    return [k for k in ranks if all(p in k.split(",") for p in want.split(","))]


@pytest.mark.slow
@pytest.mark.parametrize("name", RIGHT)
def test_equivalent_verdicts_agree_with_the_oracle(name, tmp_path):
    out = _prove(name, tmp_path, "--no-check")
    assert out["verdict"] == "EQUIVALENT", out.get("open")
    (r,) = run_oracle(EX / name)
    r = _ok(r)
    assert len(r.compared()) == out["counts"]["total"]
    assert r.max_diff() <= ATOL, max(r.compared().values(), key=lambda o: o.max_diff)


@pytest.mark.slow
@pytest.mark.parametrize("name", REFUTED)
def test_refuted_verdicts_show_the_reported_difference(name, tmp_path):
    """At the counterexample's goal and rank the oracle's values differ from the spec's; when
    ``prove`` reported a factor, the oracle measures the same factor."""
    out = _prove(name, tmp_path, "--no-check")
    assert out["verdict"] == "NOT EQUIVALENT", out.get("open")
    cx = out["counterexample"]
    (r,) = run_oracle(EX / name)
    r = _ok(r)
    o = r.outputs[cx["goal"]]
    keys = _rank_key(cx.get("rank"), r.ranks)
    assert keys
    for k in keys:
        assert o.diff[k] > 1e-9 * max(1.0, o.scale), (cx["goal"], k, o.diff)
        if cx.get("ratio") is not None and " x spec" in cx["explanation"]:   # a factor
            assert o.factor[k] == pytest.approx(float(cx["ratio"]), rel=1e-5)   # (%.6g)


@pytest.mark.slow
def test_a_plan_that_fails_on_real_values_is_reported_by_the_oracle():
    """``use_local_output=True`` on the vocab-parallel head (prove: NOT EQUIVALENT): with real
    labels the local cross-entropy indexes past the rank's vocab shard."""
    (r,) = run_oracle(EX / "llama_tp_local_output_buggy.py")
    assert isinstance(r, str) and re.search(r"IndexError: Target \d+ is out of bounds", r), r
