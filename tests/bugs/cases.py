"""Shared checks for the CASES.md bug examples (``examples/bugs/<id>_buggy.py`` / ``_fixed.py``).

Every case is asserted the same way (``docs/bugs.md``):

* buggy -> NOT EQUIVALENT, the counterexample names the diverging goal (tensor) and, for a
  constant-factor bug, the factor; for a values bug, the plan and spec values differ;
* fixed -> EQUIVALENT, and ``check-certificate`` accepts the certificate written for it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from proofs.certificate import certificate_of, write_certificate
from proofs.checker import check_certificate
from proofs.prover import prove
from spec_lang import load

ROOT = Path(__file__).resolve().parents[2]
BUGS = ROOT / "examples" / "bugs"


def prove_case(name: str, **kw: Any):
    """Prove ``examples/bugs/<name>.py``; returns the prover's Report."""
    return prove(load(BUGS / f"{name}.py"), timeout_s=kw.pop("timeout_s", 120), **kw)


def assert_refuted(case: str, goal: str | None = None, ratio: float | None = None,
                   goals_any: tuple[str, ...] = ()) -> Any:
    """``<case>_buggy.py`` is NOT EQUIVALENT; the first diverging goal is ``goal`` (or one of
    ``goals_any``) and, when ``ratio`` is given, plan / spec is that constant factor."""
    report = prove_case(f"{case}_buggy")
    assert report.verdict == "NOT EQUIVALENT", (case, report.verdict)
    cx = report.counterexample
    assert cx is not None
    if goal is not None:
        assert cx.goal == goal, (case, cx.goal, cx.others)
    if goals_any:
        assert cx.goal in goals_any, (case, cx.goal)
    text = cx.render()
    if ratio is not None:
        assert cx.ratio == pytest.approx(ratio, rel=1e-6), (case, cx.ratio, text)
        assert f"= {ratio:.3f} x spec" in text
    else:
        assert any(abs(s - p) > 1e-9 * max(1.0, abs(s)) for _, s, p in cx.values), text
    return cx


def assert_certified(case: str, tmp_path: Path, suffix: str = "_fixed") -> Any:
    """``<case><suffix>.py`` is EQUIVALENT and its certificate passes ``check-certificate``."""
    report = prove_case(f"{case}{suffix}")
    assert report.verdict == "EQUIVALENT", (case, report.verdict,
                                            [(g.name, g.reason) for g in report.open_goals])
    cert = tmp_path / f"{case}{suffix}.cert.json"
    write_certificate(cert, certificate_of(report))
    result = check_certificate(cert, retrace=True, plan_path=BUGS / f"{case}{suffix}.py")
    assert result.verdict == "EQUIVALENT" and result.checked == result.total, result.summary()
    return report


def load_variant(name: str, tmp_path: Path, subs: list[tuple[str, str]]) -> Any:
    """``examples/bugs/<name>.py`` with each ``old`` replaced by ``new`` (each must occur),
    written to ``tmp_path`` and loaded: a class mutant or a size variant of a case."""
    src = (BUGS / f"{name}.py").read_text()
    for old, new in subs:
        assert old in src, (name, old)
        src = src.replace(old, new)
    path = tmp_path / f"{name}_variant_{abs(hash(tuple(subs))) % 10**8}.py"
    path.write_text(src)
    return load(path)


def goal_values(problem: Any, goal: str, *, seed: int = 0,
                inputs: dict[str, Any] | None = None) -> tuple[Any, Any]:
    """Spec and plan values of ``goal`` on random inputs (``inputs`` overrides some by name),
    evaluated at the problem's real sizes: two ``NamedArray`` s (the plan's with rank axes)."""
    import numpy as np

    from spec_lang.evaluate import evaluate, sample_inputs

    g = next(x for x in problem.goals if x.name == goal)
    rng = np.random.default_rng(seed)
    vals = sample_inputs([g.expected, g.actual], problem.binding, rng)
    vals.update({k: np.asarray(v, dtype=np.float64) for k, v in (inputs or {}).items()})
    out = evaluate([g.expected, g.actual], problem.binding, vals, rng=rng)
    return out[g.expected], out[g.actual]
