"""Round 36 fixes of round 35c's false refusals (``tests/adversarial/ATTEMPTS.md``, "Round 36:
fixes (Megatron's groups)"), with mutants. Plans in ``plans/round36g/``; truth
``tests/adversarial/torch4_truth.py FILE 1`` (dp), the dp x tp files are r35c_10 edited.

* R35c-3: ``new_group(ranks, backend="gloo")`` (Megatron's gloo duplicate of every dp group) is
  made on the fake backend while ``dist.Backend``'s registries are torch's
  (``new_groups._builtin_backend``); with the axis's ranks it is that axis.
* R35c-5: groups made with ``use_local_synchronization=True`` are named by torch from their
  ranks: ``check_traces`` leaves them out of the order comparison (a non-member may skip the
  call) and still requires one name per set of ranks taken for an axis.
"""

from __future__ import annotations

from pathlib import Path

import pytest

ROUND36G = Path(__file__).resolve().parent / "plans" / "round36g"


def _prove(name: str, tmp_path: Path) -> dict:
    from tests.adversarial.torch_prove import prove

    return prove(ROUND36G / name, tmp_path)


@pytest.mark.slow
def test_gloo_duplicate_used_for_the_step_is_equivalent(tmp_path):
    """Truth 0.0 / 0.0 after step 1. EQUIVALENT (4 goals, 37 s)."""
    out = _prove("r36g_01_dp_gloo_group_used_right.py", tmp_path)
    assert out["_rc"] == 0 and out["verdict"] == "EQUIVALENT", out


@pytest.mark.slow
def test_gloo_duplicate_sum_not_avg_is_refuted(tmp_path):
    """Truth w2 0.0093 after step 1. NOT EQUIVALENT (4 goals refuted, 38 s)."""
    out = _prove("r36g_02_dp_gloo_group_sum_not_avg_wrong.py", tmp_path)
    assert out["_rc"] == 1 and out["verdict"] == "NOT EQUIVALENT", out


@pytest.mark.slow
def test_both_groups_of_the_dp_ranks_used_are_refused(tmp_path):
    """The dp group and its gloo duplicate both used: exit 3 (32 s), one group per ranks."""
    out = _prove("r36g_03_dp_both_groups_used_refused.py", tmp_path)
    assert out["_rc"] == 3 and "different dist.new_group groups" in out["_err"], out


@pytest.mark.slow
def test_a_backend_of_the_train_files_is_still_no_axis(tmp_path):
    """A backend the train file registers ("gloo2") is not torch's: never EQUIVALENT (exit 3,
    14 s: torch cannot make it on the fake store)."""
    out = _prove("r36g_04_dp_custom_backend_named_gloo_like_wrong.py", tmp_path)
    assert out["_rc"] != 0 and out.get("verdict") != "EQUIVALENT", out


@pytest.mark.slow
def test_local_sync_groups_made_by_members_only_are_equivalent(tmp_path):
    """Only each group's members call new_group (what local synchronisation allows):
    EQUIVALENT (113 s, loaded)."""
    out = _prove("r36g_05_dp_tp_local_sync_members_only_right.py", tmp_path)
    assert out["_rc"] == 0 and out["verdict"] == "EQUIVALENT", out


@pytest.mark.slow
@pytest.mark.parametrize("name", ["r36g_06_dp_tp_local_sync_sum_not_avg_wrong.py",
                                  "r36g_07_dp_tp_local_sync_grad_over_tp_wrong.py"])
def test_local_sync_mutants_are_refuted(name, tmp_path):
    """The dp gradient summed (r36g_06, 102 s) or reduced over tp (r36g_07, 67 s): NOT
    EQUIVALENT."""
    out = _prove(name, tmp_path)
    assert out["_rc"] == 1 and out["verdict"] == "NOT EQUIVALENT", out
