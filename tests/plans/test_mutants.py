"""The mutant suite (tests/assets/mutants.py): every mutant of the Megatron debug plans must be
rejected with a counterexample naming the right goal (and the right factor when it is one).

The count of false accepts over this table is a tracked figure (DESIGN.md 3.4): it must stay 0.
"""

import os
import subprocess
import sys
import textwrap
from dataclasses import replace
from pathlib import Path

import pytest

from proofs.prover import prove
from spec_lang import AdamW, PlanError, build_problem
from spec_lang.models import DEBUG, llama
from spec_lang.plans import GRAD_ACCUM, LOSS_PREFACTOR, MegatronSettings, megatron
from tests.assets.mutants import MUTANTS, STATIC_MUTANTS

ROOT = Path(__file__).resolve().parents[2]


def test_table_is_large_and_unique():
    ids = [m.id for m in MUTANTS]
    assert len(ids) >= 12
    assert len(set(ids)) == len(ids)
    assert all(m.description and m.goal and m.kind for m in MUTANTS)


@pytest.mark.parametrize("m", MUTANTS, ids=lambda m: m.id)
def test_mutant_is_refuted(m):
    spec, plan = m.make()
    report = prove(build_problem(spec, plan), timeout_s=60)
    assert report.verdict == "NOT EQUIVALENT", (m.id, report.verdict)
    cx = report.counterexample
    assert cx is not None and cx.goal == m.goal, (m.id, cx and cx.goal)
    text = cx.render()
    assert f"goal {m.goal}" in text
    if m.ratio is not None:
        assert cx.ratio == pytest.approx(float(m.ratio), rel=1e-6), (m.id, cx.ratio)
        assert f"= {float(m.ratio):.3f} x spec" in text
    else:
        assert cx.ratio is None or abs(cx.ratio - 1) > 1e-7


@pytest.mark.parametrize("sid,desc,text,make", STATIC_MUTANTS, ids=[s[0] for s in STATIC_MUTANTS])
def test_static_mutant_is_rejected_while_tracing(sid, desc, text, make):
    with pytest.raises(PlanError) as e:
        spec, plan = make()
        build_problem(spec, plan)
    assert text in str(e.value)


def _run_prove(tmp_path, mutant_id):
    plan_file = tmp_path / f"{mutant_id}.py"
    plan_file.write_text(textwrap.dedent(f"""\
        from tests.assets.mutants import build

        spec, plan = build({mutant_id!r})
        """))
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-c", "from proofs.cli import prove_main; "
                           "import sys; sys.exit(prove_main(sys.argv[1:]))", str(plan_file)],
                          capture_output=True, text=True, env=env, cwd=ROOT, timeout=120)


@pytest.mark.parametrize("mutant_id,goal,ratio", [
    ("missing_dp_average", "grad:output", "= 2.000 x spec"),
    ("replicated_kv_weight_treated_as_shard", "grad:layers.1.attn.wv", None),
])
def test_prove_cli_exit_1_names_the_goal(tmp_path, mutant_id, goal, ratio):
    r = _run_prove(tmp_path, mutant_id)
    assert r.returncode == 1, r.stdout + r.stderr
    assert r.stdout.startswith("NOT EQUIVALENT")
    assert f"first divergence: goal {goal}" in r.stdout
    if ratio:
        assert ratio in r.stdout


def test_docs_embed_the_mutant_table():
    from tests.assets.mutants import mutant_table

    assert mutant_table() in (ROOT / "docs" / "plans.md").read_text()


WIDE = replace(DEBUG, name="debug_wide", n_heads=8, hidden=32)    # 2 KV heads, G=4: tp up to 4


@pytest.mark.parametrize("config,tp,dp,k,settings,ratio", [
    (DEBUG, 1, 4, 1, MegatronSettings(grad_scale=()), 4.0),                           # no 1/dp
    (DEBUG, 2, 1, 4, MegatronSettings(loss_scale=(LOSS_PREFACTOR,)), 4.0),            # no 1/K
    (DEBUG, 1, 1, 4, MegatronSettings(loss_scale=(LOSS_PREFACTOR, GRAD_ACCUM, GRAD_ACCUM)),
     0.25),                                                                             # 1/K twice
    (WIDE, 4, 1, 2, MegatronSettings(embedding_reduce=("all_reduce", "all_reduce")), 4.0),
], ids=["missing_dp_average@dp4", "missing_grad_accum@k4", "grad_accum_twice@k4",
        "embedding_allreduce_backward@tp4"])
def test_scale_mutants_scale_with_the_mesh(config, tp, dp, k, settings, ratio):
    """The same bug at other axis sizes: the factor follows the axis (not a constant 2)."""
    model = llama(config)
    plan = megatron(model, tp=tp, dp=dp, microbatches=k, settings=settings)
    report = prove(build_problem(model.spec(AdamW()), plan), timeout_s=60)
    assert report.verdict == "NOT EQUIVALENT"
    assert report.counterexample.ratio == pytest.approx(ratio, rel=1e-6)
