"""A NOT EQUIVALENT names where the divergence starts in the user's code, not only the line that
produces the first diverging goal (``proofs/divergence.py``; the new-user trial of stop 53: the
counterexample named ``loss.backward()`` or the gradient all-reduce, far from the wrong line).

The plan is ``examples/torch/mlp_ddp.py`` (right) with one line added to ``parallelize``: a
forward hook that scales the first layer's output. The first diverging goal is a gradient,
produced at the all-reduce line; the note names the hook's line. Sites are messages only: the
verdict and the certificate's replay do not read them.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
HOOK = "    model.w1.register_forward_hook(lambda m, i, o: o * 3.0)   # BUG: scales w1's output\n"


def _plan(tmp_path: Path) -> tuple[Path, int]:
    src = (ROOT / "examples" / "torch" / "mlp_ddp.py").read_text()
    head = "def parallelize(model, mesh):\n"
    assert head in src
    text = src.replace(head, head + HOOK)
    path = tmp_path / "mlp_ddp_hook.py"
    path.write_text(text)
    return path, text.splitlines().index(HOOK.rstrip("\n")) + 1


def text_line(path: Path, marker: str) -> int:
    """The line of ``marker`` in ``path`` (the test follows the file, not a number)."""
    return next(i for i, ln in enumerate(path.read_text().splitlines(), 1) if marker in ln)


def _prove(tmp_path: Path) -> tuple[Path, int, subprocess.CompletedProcess]:
    path, line = _plan(tmp_path)
    r = subprocess.run([sys.executable, "-c", "import sys; from proofs.cli import prove_main; "
                        "sys.exit(prove_main(sys.argv[1:]))", "--torch", str(path), "--json",
                        "--jobs", "1", "--no-check", "--certificate", str(tmp_path / "c.json")],
                       cwd=ROOT, capture_output=True, text=True, timeout=1500)
    return path, line, r


def test_the_note_names_the_hook_that_scales_an_activation(tmp_path):
    path, line, r = _prove(tmp_path)
    assert r.returncode == 1, r.stderr[-2000:]
    out = json.loads(r.stdout)
    assert out["verdict"] == "NOT EQUIVALENT", out
    cx = out["counterexample"]
    # the report (CI's refuted torch plan: mlp_ddp_sum_buggy.py's test, which also checks the
    # factor, is slow): the gradient, where it is produced (the division after the all-reduce
    # in the user's file), its placement, every rank, and values that differ by no constant
    # factor
    reduce_line = text_line(path, "p.grad.div_(")
    assert cx["goal"] == "grad:w2.weight" and cx["site"] == f"{path}:{reduce_line}", cx
    assert cx["placement"] == "dp: Replicate()" and cx["rank"] == {} and cx["ratio"] is None
    assert cx["values"] and all(abs(float(v["spec"]) - float(v["plan"])) > 1e-6
                                for v in cx["values"]), cx["values"]
    notes = [n for n in cx.get("notes", []) if n.startswith("values first differ at ")]
    assert len(notes) == 1, cx.get("notes")
    assert notes[0].startswith(f"values first differ at {path}:{line} (a product of "), notes[0]
    assert notes[0].endswith("every value it reads agrees with the spec's")


@pytest.mark.slow
def test_its_certificate_is_checked_without_torch(tmp_path):
    """CI's torch certificate check (``.ci/run`` runs it after the README's suite: the
    re-trace costs as much as the prove, ~20-40 s, over the suite's 10-minute budget):
    check-certificate re-traces the file in a process without torch and accepts the NOT
    EQUIVALENT (exit 1)."""
    _, _, r = _prove(tmp_path)
    assert r.returncode == 1, r.stderr[-2000:]
    from tests.torch_frontend.test_examples import _check_without_torch  # noqa: PLC0415

    code, answer, torch_mods = _check_without_torch(tmp_path / "c.json")
    assert code == 1 and answer["valid"] and answer["verdict"] == "NOT EQUIVALENT", answer
    assert answer["retraced"] is True and not torch_mods, torch_mods[:5]
