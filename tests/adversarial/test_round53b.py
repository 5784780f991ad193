"""Adversarial round 53b (``tests/adversarial/ATTEMPTS.md``, "Round 53b"): deep copies and an
EMA in the torch front end (9d1f70c), ``Dims.transaction``, ``proofs/mesh_note.py``.

Plans in ``plans/round53b/``; the truth is ``python tests/adversarial/torch4_truth.py FILE 2``
(every ``*_wrong`` plan differs from the single-device run at step 1 or 2). The fast tests
check the fixed pieces directly; the slow ones prove the plans (30-80 s each).
"""

from __future__ import annotations

import copy
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from torch import nn

from spec_lang.errors import PlanError

ROUND = Path(__file__).resolve().parent / "plans" / "round53b"
ROUND46F = Path(__file__).resolve().parent / "plans" / "round46f"
ROOT = Path(__file__).resolve().parents[2]


def _prove(path: Path, tmp_path: Path) -> dict:
    from tests.adversarial.torch_prove import prove

    return prove(path, tmp_path)


def _not_equivalent(out: dict) -> bool:
    return not (out["_rc"] == 0 and out.get("verdict") == "EQUIVALENT")


# -- R53b-1: the Python attributes and flags of a tensor held outside the model -----------------

def _fingerprint(v: object) -> str:
    from spec_lang.torch_frontend.step_state import _Encoder, _text

    return _text(_Encoder({}, frozenset()), v)


def test_r53b_1_tensor_attribute_in_fingerprint():
    """R53b-1: a non-goal tensor was fingerprinted by shape, dtype, device (and version)
    only: a step counter in its ``__dict__`` or its ``requires_grad`` flag was no change."""
    t = torch.empty(2, 3, device="meta")
    before = _fingerprint({"e": t})
    t.seen = True
    after_attr = _fingerprint({"e": t})
    assert after_attr != before
    t.requires_grad_(True)
    assert _fingerprint({"e": t}) != after_attr


def test_r53b_3_meta_version_in_fingerprint():
    """R53b-3: a plain meta tensor's version counter was left out of the fingerprint; it is
    readable past the ``Tensor._version`` guard (``torch._C.TensorBase``'s descriptor)."""
    t = torch.empty(2, 3, device="meta")
    before = _fingerprint({"e": t})
    t.mul_(2.0)
    assert torch._C.TensorBase.__dict__["_version"].__get__(t) == 1  # noqa: SLF001
    assert _fingerprint({"e": t}) != before


# -- R53b-2: a plain meta tensor sharing memory with a parameter --------------------------------

def test_r53b_2_meta_alias_of_parameter_refused():
    """R53b-2: ``p.detach()`` of a meta parameter (no view: ``_base`` is None) was taken as a
    captured constant: its writes are the parameter's for real. A deep copy is taken."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    from spec_lang.errors import PlanError
    from spec_lang.torch_frontend.deep_copies import meta_constants

    p = nn.Parameter(torch.empty(3, 3, device="meta"))
    alias, own = p.detach(), copy.deepcopy(p)
    mode = FakeTensorMode()
    with meta_constants(mode), mode:
        assert tuple((own * 2.0).shape) == (3, 3)
        with pytest.raises(PlanError, match="R53b-2"):
            alias.mul(2.0)


# -- R53b-4: nn.Parameter.__deepcopy__ copies neither the gradient nor the attributes ---------

def test_r53b_4_parameter_deepcopy_like_torch():
    """R53b-4: the capture's deep copy of a parameter kept its gradient and attributes;
    torch's ``nn.Parameter.__deepcopy__`` drops both (measured on a real parameter here).
    Since round 53c (R53c-4: the step can mark a plain tensor ``_is_param``) the capture
    refuses a parameter's deep copy instead of guessing which copy the real run makes."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    from spec_lang.torch_frontend.deep_copies import fake_deepcopy

    real = nn.Parameter(torch.ones(2, 2))
    real.grad, real.tag = torch.ones(2, 2), 1
    want = copy.deepcopy(real)
    assert want.grad is None and not hasattr(want, "tag")
    deepcopy = fake_deepcopy(torch.Tensor.__deepcopy__)
    with FakeTensorMode() as mode:
        fp = nn.Parameter(mode.from_tensor(torch.ones(2, 2)))
        fp.grad = torch.ones(2, 2)
        fp.tag = 1
        with pytest.raises(PlanError, match=r"copy\.deepcopy of a parameter"):
            deepcopy(fp, {})


# -- R53b-5: the mesh note on a file too deeply nested for ast ---------------------------------

@pytest.mark.parametrize("src", [
    b"MESH = {'dp': 4, 'tp': 4}\nX = a" + b".b" * 300000 + b"\n",     # RecursionError
    b"MESH = {'dp': 4, 'tp': 4}\nX = " + b"-" * 200000 + b"1\n",      # MemoryError
])
def test_r53b_5_mesh_note_deep_nesting(src):
    """R53b-5: ``ast.parse`` raised RecursionError / MemoryError in prove's own process:
    prove exited 1 (the NOT EQUIVALENT code) with a traceback. Now: no note."""
    from proofs.mesh_note import untraced_note

    assert untraced_note(src, "t.py") is None


def _prove_deep(tmp_path: Path) -> subprocess.CompletedProcess:
    """prove --torch of r53b_06 (written here: 600 kB), 3 s."""
    path = tmp_path / "r53b_06_mesh_note_deep_expression_raises.py"
    path.write_text('"""R53b-5: an attribute chain of 300000 links."""\n'
                    'MESH = {"dp": 4, "tp": 4}\nX = a' + ".b" * 300000 + "\n")
    return subprocess.run([sys.executable, "-c", "import sys; from proofs.cli import "
                           "prove_main; sys.exit(prove_main(sys.argv[1:]))", "--torch",
                           str(path), "--jobs", "1", "--no-check"], cwd=ROOT,
                          capture_output=True, text=True, timeout=1500)


def test_r53b_5_prove_deep_file_not_exit_1(tmp_path):
    """R53b-5 end to end: 9d1f70c exited 1 (the NOT EQUIVALENT code) with a traceback from
    the mesh note; now the tracing process reports it: exit 3 (R53b-6), never 1."""
    r = _prove_deep(tmp_path)
    assert r.returncode in (2, 3) and "Traceback" not in r.stderr, (r.returncode,
                                                                      r.stderr[-1500:])


def test_r53b_6_deep_file_is_bad_input(tmp_path):
    """R53b-6 (fixed at stop 54): a train file Python cannot compile (RecursionError in
    ``ast``) is the user's input, exit 3 with its line, as a SyntaxError is (was "a bug in
    shardproof", exit 2)."""
    r = _prove_deep(tmp_path)
    assert r.returncode == 3 and "bug in shardproof" not in r.stderr, r.stderr[-1500:]
    assert "r53b_06_mesh_note_deep_expression_raises.py:1: the train file is nested too " \
        "deeply for Python to compile (RecursionError)" in r.stderr, r.stderr[-1500:]


# -- the plans: never EQUIVALENT -------------------------------------------------------------

@pytest.mark.slow
@pytest.mark.parametrize("name", [
    "r53b_01_ema_tensor_attribute_counter_wrong.py",      # R53b-1
    "r53b_02_ema_requires_grad_flag_wrong.py",            # R53b-1
    "r53b_03_ema_version_through_tensorbase_wrong.py",    # R53b-3
    "r53b_04_param_detach_alias_written_wrong.py",        # R53b-2
    "r53b_05_param_view_written_wrong.py",                # held view: refused before (R44c-5)
    "r53b_07_param_deepcopy_grad_dropped_wrong.py",       # R53b-4
    "r53b_08_param_deepcopy_attribute_dropped_wrong.py",  # R53b-4
    "r53b_09_ema_inf_times_zero_in_loss_wrong.py",        # 0 * Opaque: UNKNOWN already
])
def test_r53b_wrong_plans_not_equivalent(name, tmp_path):
    """Each was EQUIVALENT at 9d1f70c (but r53b_05: exit 3, r53b_09: UNKNOWN); the truth
    differs."""
    out = _prove(ROUND / name, tmp_path)
    assert _not_equivalent(out), out
