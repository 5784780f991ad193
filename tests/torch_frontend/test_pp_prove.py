"""``prove --torch`` on the pipelined examples and their mutants (issue 11, PP x DP;
``docs/torch.md``, "Pipelining"), each through the command a user types, and the verdicts
against the gloo truth of ``pp_truth.py`` (an independent oracle: one process per rank on a
real process group, float64).

Every run traces 4 ranks at probe sizes and 2 at real sizes plus the spec twice, each in its
own process importing torch: 100-250 s on two shared cores, so every test here is ``slow``
(no pipelined file runs under the ~20 s of the default suite; the fast tests of the
pipelining path are ``test_pp_fold.py``, ``test_pipelining_refused.py`` and the micro-batch
case of ``test_rules_sound.py``).
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
EX = ROOT / "examples" / "torch"
sys.path.insert(0, str(Path(__file__).resolve().parent))

pytestmark = pytest.mark.slow


def _prove(name: str, *extra: str, timeout: float = 1800) -> dict:
    r = subprocess.run([sys.executable, "-c", "import sys; from proofs.cli import prove_main; "
                        "sys.exit(prove_main(sys.argv[1:]))", "--torch", f"examples/torch/{name}",
                        "--json", "--jobs", "1", *extra], cwd=ROOT, capture_output=True,
                       text=True, timeout=timeout)
    out = json.loads(r.stdout) if r.stdout.strip() else {}
    out["_rc"], out["_stderr"] = r.returncode, r.stderr
    return out


def _line(name: str, marker: str) -> int:
    for i, ln in enumerate((EX / name).read_text().splitlines(), 1):
        if marker in ln:
            return i
    raise AssertionError(f"{marker!r} not in {name}")


def test_gpipe_x_dp_proves_equivalent_and_the_checker_re_traces_it(tmp_path):
    cert = tmp_path / "llama_pp_dp.json"
    out = _prove("llama_pp_dp.py", "--certificate", str(cert))
    assert out["verdict"] == "EQUIVALENT" and out["_rc"] == 0, (out.get("open"), out["_stderr"])
    # 21 parameters x (gradient, update, 2 AdamW states, AdamW step counter) and the two RoPE
    # buffers (every input a stage holds is compared, R23-5); the loss varies over dp (each
    # rank's micro-batches) and is not compared
    assert out["counts"]["total"] == 107
    r = subprocess.run([sys.executable, "-c", "import sys; from proofs.cli import check_main; "
                        "sys.exit(check_main(sys.argv[1:]))", str(cert), "--json"], cwd=ROOT,
                       capture_output=True, text=True, timeout=1800)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]


def test_1f1b_x_dp_proves_equivalent():
    out = _prove("llama_pp_1f1b_dp.py", "--no-check")
    assert out["verdict"] == "EQUIVALENT" and out["_rc"] == 0, (out.get("open"), out["_stderr"])
    assert out["counts"]["total"] == 107


def test_tied_weight_not_summed_over_pp_is_refuted_naming_the_copy_stage_and_line():
    name = "gpt2_pp_tied_buggy.py"
    out = _prove(name, "--no-check")
    assert out["verdict"] == "NOT EQUIVALENT" and out["_rc"] == 1, out["_stderr"]
    cx = out["counterexample"]
    assert re.fullmatch(r"grad:(lm_head|transformer\.wte)\.weight", cx["goal"]), cx["goal"]
    assert "pipeline stage" in cx["placement"] and "tied weight" in cx["placement"]
    assert f"{name}:" in cx["site"]
    assert cx["values"] and any(abs(float(v["spec"]) - float(v["plan"])) > 1e-9
                                for v in cx["values"])


def test_tied_weight_summed_over_pp_with_dist_all_reduce_proves_equivalent():
    """The right tied GPT-2 pipeline: the pp all-reduce of the tied weight's gradient is
    composed as one all-reduce of the two stages' copies (pp_merge)."""
    out = _prove("gpt2_pp_tied.py", "--no-check")
    assert out["verdict"] == "EQUIVALENT" and out["_rc"] == 0, (out.get("open"), out["_stderr"])
    assert out["counts"]["open"] == 0


def test_tied_weight_averaged_over_pp_is_refuted_by_one_half():
    name = "gpt2_pp_tied_avg_buggy.py"
    out = _prove(name, "--no-check")
    assert out["verdict"] == "NOT EQUIVALENT" and out["_rc"] == 1, out["_stderr"]
    cx = out["counterexample"]
    assert re.fullmatch(r"grad:(lm_head|transformer\.wte)\.weight", cx["goal"]), cx["goal"]
    assert float(cx["ratio"]) == pytest.approx(0.5, abs=1e-9), cx
    assert f"{name}:" in cx["site"], cx


def test_missing_scale_grads_is_refuted_by_the_micro_batch_count():
    name = "llama_pp_dp_no_scale_grads_buggy.py"
    out = _prove(name, "--no-check")
    assert out["verdict"] == "NOT EQUIVALENT" and out["_rc"] == 1, out["_stderr"]
    cx = out["counterexample"]
    assert cx["goal"].startswith("grad:")
    assert float(cx["ratio"]) == pytest.approx(2.0, abs=1e-9)


def test_a_stage_without_its_dp_all_reduce_is_refuted_on_that_stage():
    name = "llama_pp_dp_stage_no_dp_reduce_buggy.py"
    out = _prove(name, "--no-check")
    assert out["verdict"] == "NOT EQUIVALENT" and out["_rc"] == 1, out["_stderr"]
    cx = out["counterexample"]
    assert "pipeline stage 1 of 2" in cx["placement"], cx
    assert f"{name}:" in cx["site"]


def test_a_constant_sent_upstream_is_refused_naming_the_line():
    name = "llama_pp_dp_detached_stage_input_buggy.py"
    out = _prove(name, "--no-check")
    assert out["_rc"] == 3 and "verdict" not in out, out
    text = out["_stderr"] + json.dumps(out)
    assert "depends on no input" in text
    assert f"{name}:{_line(name, 'schedule.step(')}:" in text, text


@pytest.mark.parametrize("name,differs", [
    ("llama_pp_dp.py", False),
    ("llama_pp_dp_no_scale_grads_buggy.py", True),
    ("llama_pp_dp_stage_no_dp_reduce_buggy.py", True),
    ("llama_pp_dp_detached_stage_input_buggy.py", True),
    ("llama_pp_fsdp.py", False),
    ("llama_pp_fsdp_divide_factor_buggy.py", True),
])
def test_the_gloo_truth_agrees(name, differs):
    """The oracle differs exactly where ``prove`` does not say EQUIVALENT (the other files:
    ``test_pp_truth.py``)."""
    from pp_truth import run
    r = run(str(EX / name))
    worst = max(max(r["grad"].values()), max(r["param"].values()))
    assert (worst > 1e-6) == differs, worst
