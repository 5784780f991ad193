"""Every open goal is explained in the user's terms with a next step and a docs/unknown.md anchor
(issue 12 item 2); the prover's internal reason only under ``--verbose`` (and in ``--json``)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from proofs.cli import prove_main
from proofs.unknown import _TABLE, explain, explain_unsupported

ROOT = Path(__file__).resolve().parents[2]
DOC = (ROOT / "docs" / "unknown.md").read_text()
SRC = (ROOT / "tests" / "proofs" / "plans" / "tiny_dp_tp.py").read_text()

# reasons as the prover writes them (proofs/phases/*.py, the torch front end) -> the code
REASONS = [
    ("normal forms differ: EINSUM[('ffn', 'seq')] vs POW[Fraction(2, 1)]; z3 on EINSUM vs POW "
     "not attempted: dim batch keeps its real size 1", "rewrite-stuck"),
    ("timeout", "timeout"),
    ("not proved", "not-proved"),
    ("same goal as grad:w1, which is open: timeout", "same-goal"),
    ("same lemma as cut:l0, which is open: not proved", "same-goal"),
    ("rng: dropout 'extra0' has no spec dropout of that name (values did not differ on random "
     "inputs)", "dropout"),
    ("not attempted: the plan is refuted", "plan-refuted"),
    ("normal forms differ: ADD vs MUL; a denominator in the differing subterms is not shown "
     "nonzero on the spec's domain", "denominator"),
    ("a REGION node was not lowered (internal)", "region"),
]


@pytest.mark.parametrize("reason,code", REASONS)
def test_each_reason_has_its_explanation(reason, code):
    ex = explain(reason)
    assert ex.code == code, (reason, ex)
    assert ex.text and ex.next and ex.link == f"docs/unknown.md#{code}"
    assert "Fraction" not in ex.text and "EINSUM" not in ex.text      # no internal dump


def test_the_first_difference_is_named_in_words():
    ex = explain(REASONS[0][0])
    assert "first difference: a sum of products in the spec, a power in the plan" in ex.text


def test_unsupported_outputs_are_explained():
    assert explain_unsupported("ranks", "ranks off the axes of the mesh ({'dp': 1, 'tp': 1}) "
                               "are not traced").code == "untraced-ranks"
    ex = explain_unsupported("ranks", "ranks off the axes of the mesh {'dp': 2, 'tp': 2} (e.g. "
                             "{'dp': 1, 'tp': 1}) are not traced: ... (MESH at train.py:11)")
    assert ex.code == "untraced-ranks" and ex.text.endswith("(MESH at train.py:11)")
    ex = explain_unsupported("ranks", "argument 1[0] of sum_1 (aten.sum.dim_IntList) is 1 on "
                             "rank {'dp': 1} and 0 on rank {'dp': 0}, and no rule reads it per "
                             "rank (train.py:51): the lowered program is rank {'dp': 0}'s there")
    assert ex.code == "rank-literal" and "train.py:51" in ex.text and "sum_1" in ex.text
    assert explain_unsupported("state", "param_groups[0].lr leaves the step as 0.0015 in the "
                               "parallel step, 0.003 in the single-device step").code == "step-state"
    ex = explain_unsupported("grad:w", "aten.foo.default at train.py:12 has no lowering rule")
    assert ex.code == "not-lowered" and "train.py:12" in ex.text
    ex = explain_unsupported("grad:w", "gradients read apart: read at optimizer.step() in the "
                             "parallel step and at clipping in the single-device step (R41e-3)")
    assert ex.code == "grads-read-apart" and "at optimizer.step() in the parallel" in ex.text
    assert "lowering rule" not in ex.text and "clip_grads_with_norm_" in ex.next


def test_every_code_has_a_section_in_docs_unknown():
    anchors = set(re.findall(r'^## .*\{#([a-z-]+)\}', DOC, re.M))
    codes = {row[0] for row in _TABLE} | {"not-proved"}
    assert codes == anchors, (codes - anchors, anchors - codes)


def test_prove_prints_the_explanation_and_the_internal_reason_only_when_verbose(tmp_path, capsys):
    plan = tmp_path / "open.py"
    plan.write_text(SRC)
    code = prove_main([str(plan), "--no-check", "--timeout", "1e-9"])
    out = capsys.readouterr().out
    assert code == 2 and out.startswith("UNKNOWN: ")
    lines = [ln for ln in out.splitlines() if ln.startswith("  open: ")]
    assert lines and all("[docs/unknown.md#timeout]" in ln for ln in lines), out
    assert "next: raise --timeout" in out and "prover:" not in out
    code = prove_main([str(plan), "--no-check", "--timeout", "1e-9", "--verbose"])
    out = capsys.readouterr().out
    assert code == 2 and "        prover: timeout" in out
    code = prove_main([str(plan), "--no-check", "--timeout", "1e-9", "--json"])
    v = json.loads(capsys.readouterr().out)
    assert v["open"] and all(o["code"] == "timeout" and o["reason"] == "timeout"
                             and o["next"].startswith("raise --timeout") for o in v["open"])


def test_a_literal_read_at_the_probe_sizes_only_is_explained_as_a_size_literal():
    why = ("argument 1[0] of mean (aten.mean.dim) is 0 at the probe sizes and 1 at the real "
           "sizes, and no rule reads it at both (train.py:44)")
    ex = explain_unsupported("sizes", why)
    assert ex.code == "size-literal" and "train.py:44" in ex.text and "mean" in ex.text
    assert ex.link == "docs/unknown.md#size-literal"
