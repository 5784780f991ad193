"""Adversarial round 43a (``tests/adversarial/ATTEMPTS.md``, "Round 43a"), against
merge/ppleaf43 at 7319f22: design 43's stand-in for a ``fully_shard`` pipeline stage (one
unsharded leaf per parameter per ``schedule.step``, ``spec_lang/torch_frontend/pp_leaves.py``,
``pp_data_parallel.py``). Plans in ``plans/round43a/``. Truth:
``tests/torch_frontend/pp_truth.py FILE``. All slow (every prove traces several processes).
"""

from __future__ import annotations

from pathlib import Path

import pytest

ROUND43A = Path(__file__).resolve().parent / "plans" / "round43a"

pytestmark = pytest.mark.slow


def _not_accepted(out: dict) -> bool:
    """Anything but EQUIVALENT (NOT EQUIVALENT, UNKNOWN or a refusal)."""
    return out["_rc"] != 0 and out.get("verdict") != "EQUIVALENT"


def _equivalent(out: dict) -> bool:
    return out["_rc"] == 0 and out.get("verdict") == "EQUIVALENT"


def _prove(name: str, tmp_path: Path) -> dict:
    from tests.adversarial.torch_prove import prove

    return prove(ROUND43A / name, tmp_path)


# -- findings ---------------------------------------------------------------------------------


def test_r43a_1_shard_zeroed_by_a_backward_hook_is_not_accepted(tmp_path):
    """R43a-1: EQUIVALENT at 7319f22 (107 goals, 162 s); truth: wrong,
    ``layers.1.feed_forward.w3``'s gradient 6.1e-3 off, ``output.weight``'s 5.3e-3, updates
    6.0e-4. Since ``pp_leaves.writes_refused`` (stop 43): exit 3 naming the hook's line
    (``aten.zero_`` writes into a parameter of the stage; 32 s)."""
    out = _prove("r43a_01_hook_zeroes_shard_1f1b.py", tmp_path)
    assert _not_accepted(out), out
    assert out["_rc"] == 3 and "writes into a parameter" in out.get("_err", ""), out


def test_r43a_2_earlier_unit_grad_read_in_a_later_units_backward_is_proved(tmp_path):
    """R43a-2: NOT EQUIVALENT at 7319f22 (214 s, 122 goals refuted); truth: right (gradients
    4.2e-17, updates 1.7e-15): block 3's hook sees block 2's ``.grad`` None for real (block 2
    resharded by F1), the stand-in's leaf held micro-batch 0's gradient at B1. Since the
    leaves are registered unit by unit (``pp_leaves.pre_backward_hooks``, stop 43):
    EQUIVALENT (197 goals, 144 s)."""
    out = _prove("r43a_02_early_unit_grad_read_in_hook_1f1b.py", tmp_path)
    assert _equivalent(out), out


def test_r43a_1_shard_zeroed_by_a_backward_hook_gpipe_is_not_accepted(tmp_path):
    """R43a-1 under GPipe: EQUIVALENT at 7319f22 (107 goals, 178 s); truth: wrong, as r43a_01
    (6.1e-3 / 5.3e-3 / 6.0e-4). Since stop 43: exit 3 (23 s)."""
    out = _prove("r43a_03_hook_zeroes_shard_gpipe.py", tmp_path)
    assert _not_accepted(out), out
    assert out["_rc"] == 3 and "writes into a parameter" in out.get("_err", ""), out


# -- sound outcomes ---------------------------------------------------------------------------


def test_r43a_shard_zeroed_under_no_grad_in_a_backward_hook_is_refused(tmp_path):
    """r43a_01 with ``torch.no_grad(): t.zero_()`` (the stored version counter bumps): exit 3
    at 7319f22 (41 s), "written in place inside schedule.step"; truth wrong (as r43a_01)."""
    out = _prove("r43a_04_hook_zeroes_shard_no_grad_1f1b.py", tmp_path)
    err = out.get("_err", "")
    assert out["_rc"] == 3 and ("written in place" in err or "writes into a parameter" in err), out
