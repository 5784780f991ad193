"""A real-width certificate checked by Coq (issue 17, docs/coq.md "CI"): the Llama 3 8B plan
(``examples/llama3_8b_megatron.py``, TP8 x DP4) proved with ``--certificate`` and re-checked by
coqc, every obligation an equality Coq's kernel checked with no step taken as a hypothesis.
``slow`` (about a minute of wall time with the library built); the 405B is a bench
(``python bench/coq_check.py examples/llama31_405b.py``), not a test."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.proofs.test_coq import coq_cache, needs_coq  # noqa: F401 (fixture)

ROOT = Path(__file__).resolve().parents[2]


@needs_coq
@pytest.mark.slow
def test_llama3_8b_certificate_is_coq_checked(coq_cache: Path, tmp_path: Path) -> None:  # noqa: F811
    from proofs.coq_run import coq_check
    out = tmp_path / "8b.json"
    subprocess.run([sys.executable, "-m", "proofs.cli", "prove",
                    str(ROOT / "examples" / "llama3_8b_megatron.py"), "--certificate", str(out),
                    "--no-check"], check=True, cwd=ROOT, stdout=subprocess.DEVNULL)
    cert = json.loads(out.read_text())
    r = coq_check(cert, cache=coq_cache)
    names = [o["name"] for o in cert["obligations"]]
    assert len(names) == 1165
    assert r.status == {n: "checked" for n in names}
    assert r.export.opaque == {} and r.failed_steps == []
    assert r.rule_steps_checked == r.export.rule_steps == 2346
