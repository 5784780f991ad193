"""PP x FSDP2 (torchtitan's pipeline + ``fully_shard``; ``spec_lang/torch_frontend/
pp_data_parallel.py``, ``docs/torch.md`` "Pipelining" step 7): the variants and mutants of
``examples/torch/llama_pp_fsdp.py`` in ``pp_plans/llama_pp_fsdp_*.py``, each proved and run on
the gloo truth (``pp_truth.py``: 4 processes, float64). The example itself and its divide-factor
mutant are ``test_examples.py`` / ``test_pp_prove.py`` / ``test_pp_truth.py``.

Every prove traces 8 processes: 140-400 s on the shared 2-core machine, so all are ``slow``;
the fast tests of the path are ``test_pp_data_parallel.py``.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from tests.adversarial.torch_prove import prove

HERE = Path(__file__).resolve().parent
PLANS = HERE / "pp_plans"
sys.path.insert(0, str(HERE))

pytestmark = pytest.mark.slow

RIGHT = ["llama_pp_fsdp_1f1b.py", "llama_pp_fsdp_replicate.py",
         "llama_pp_fsdp_no_scale_grads_sum.py"]
# name, the goal refuted first, its stage, plan / spec (None: not a constant factor)
WRONG = [("llama_pp_fsdp_no_scale_grads_buggy.py", "grad:output.weight", 1, 2.0),
         ("llama_pp_fsdp_double_reduce_buggy.py", "grad:output.weight", 1, None),
         ("llama_pp_fsdp_one_stage_buggy.py", r"grad:", 1, None)]


@pytest.mark.parametrize("name", RIGHT)
def test_right_pp_fsdp_variants_prove_equivalent(name, tmp_path):
    out = prove(PLANS / name, tmp_path)
    assert out.get("verdict") == "EQUIVALENT" and out["_rc"] == 0, out
    assert out["counts"]["total"] == 107 and out["counts"]["open"] == 0, out["counts"]


@pytest.mark.parametrize("name,goal,stage,ratio", WRONG)
def test_wrong_pp_fsdp_mutants_are_refuted_naming_parameter_stage_rank(
        name, goal, stage, ratio, tmp_path):
    out = prove(PLANS / name, tmp_path)
    assert out.get("verdict") == "NOT EQUIVALENT" and out["_rc"] == 1, out
    cx = out["counterexample"]
    assert cx["goal"].startswith(goal), cx["goal"]
    assert f"pipeline stage {stage} of 2" in cx["placement"] and cx["rank"] == {"dp": 0}, cx
    if ratio is not None:
        assert float(cx["ratio"]) == pytest.approx(ratio, abs=1e-9), cx
    else:
        assert any(abs(float(v["spec"]) - float(v["plan"])) > 1e-9 for v in cx["values"])


def test_fsdp2_on_the_blocks_only_fails_at_capture_as_it_fails_for_real(tmp_path):
    """The stage module's own parameters stay plain, the blocks' are DTensors: AdamW's foreach
    step raises for real (pp_truth: every rank exits 1) and in the capture, exit 3."""
    name = "llama_pp_fsdp_blocks_only_crash.py"
    out = prove(PLANS / name, tmp_path)
    assert out["_rc"] == 3 and "verdict" not in out, out
    assert f"{name}:" in out["_err"] and "got mixed torch.Tensor and DTensor" in out["_err"]


@pytest.mark.parametrize("name,differs", [(n, False) for n in RIGHT]
                         + [(w[0], True) for w in WRONG])
def test_the_gloo_truth_agrees(name, differs):
    from pp_truth import run
    r = run(str(PLANS / name))
    worst = max(max(r["grad"].values()), max(r["param"].values()))
    assert (worst > 1e-6) == differs, worst
