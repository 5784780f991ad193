"""Round 49e: the shared ``storage_writes.on_dispatch`` wrapper (fde2714) for write counting and
``fsdp_freed.freed_reads_refused``, attacked end to end (``tests/adversarial/ATTEMPTS.md``,
"Round 49e"). Plans in ``plans/round49e/``. Truth: ``tests/adversarial/torch4_truth.py FILE 2``
(dp 2, gloo, float64). R49e-1 / R49e-2 (an operator run with the Python dispatch key
excluded is seen by no dispatch mode: neither the trace, nor the write counting, nor the
freed-read refusal) were open at fde2714; since stop 50 the switch is refused, exit 3, at the
user's line (``spec_lang/torch_frontend/dispatch_escapes.py``).
"""

from __future__ import annotations

from pathlib import Path

import pytest

ROUND49E = Path(__file__).resolve().parent / "plans" / "round49e"

pytestmark = pytest.mark.slow


def _equivalent(out: dict) -> bool:
    return out["_rc"] == 0 and out.get("verdict") == "EQUIVALENT"


def _prove(name: str, tmp_path: Path) -> dict:
    from tests.adversarial.torch_prove import prove

    return prove(ROUND49E / name, tmp_path)


def test_r49e_1_disable_torch_dispatch_grad_write_is_refused(tmp_path):
    """R49e-1: the DTensor grads' local tensors doubled in place under
    ``torch._C._DisableTorchDispatch`` (parallel run only): EQUIVALENT at fde2714 (6 goals,
    53 s); truth wrong (w0 0.0064, w1 0.0027, w2 0.0033). Since stop 50 exit 3 (7 s)."""
    out = _prove("r49e_05_disable_torch_dispatch_grad_write_wrong.py", tmp_path)
    assert out["_rc"] == 3 and "_DisableTorchDispatch" in out["_err"] \
        and ":61:" in out["_err"], out


def test_r49e_1_exclude_python_key_grad_write_is_refused(tmp_path):
    """R49e-1 (same cause): as r49e_05 under
    ``torch._C._ExcludeDispatchKeyGuard(DispatchKeySet(DispatchKey.Python))``: EQUIVALENT at
    fde2714 (6 goals, 32 s); truth wrong (w0 0.0064). Since stop 50 exit 3."""
    out = _prove("r49e_06_exclude_python_key_grad_write_wrong.py", tmp_path)
    assert out["_rc"] == 3 and "_ExcludeDispatchKeyGuard" in out["_err"], out


def test_r49e_2_disable_torch_dispatch_freed_read_is_refused(tmp_path):
    """R49e-2: r49b_05's read of the kept root w0 (freed after ``optimizer.step()``) under
    ``torch._C._DisableTorchDispatch``, value unused: EQUIVALENT at fde2714 (6 goals, 65 s);
    truth: both ranks die (SIGSEGV, -11). Since stop 50 exit 3 at the line."""
    out = _prove("r49e_02_disable_torch_dispatch_freed_read_crash.py", tmp_path)
    assert out["_rc"] == 3 and ":59:" in out["_err"], out


@pytest.mark.parametrize("name", [
    "r49e_01_try_except_freed_read_crash.py",          # exit 3: the plan catches PlanError
    "r49e_03_user_dispatch_mode_freed_read_crash.py",  # exit 3: the read refused in the mode
    "r49e_04_zero_into_freed_crash.py",                # exit 3: aten.zero_ refused
    "r49e_07_data_write_shard_between_fwd_bwd_wrong.py",  # exit 3 (R44b-1)
    "r49e_08_c10d_all_reduce_shard_after_backward_wrong.py",  # NOT EQUIVALENT
])
def test_r49e_refused_or_refuted(name, tmp_path):
    """Round 49e sound controls: truth ranks SIGSEGV (01, 03, 04) or wrong (07 w2 0.90, 08 w0
    0.90); at fde2714 exit 3 (01: 27 s, 03: 20 s, 04: 11 s, 07: 17 s), 08 NOT EQUIVALENT (60 s)."""
    out = _prove(name, tmp_path)
    assert not _equivalent(out), out
