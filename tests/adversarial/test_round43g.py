"""Round 43g: break 94887be (a ``fully_shard([a, b])`` group that becomes FSDP2's root refused,
``settings["_group"] = len(list)``, ``fsdp_hold._decide_root``), ``tests/adversarial/
ATTEMPTS.md``, "Round 43g". Plans in ``plans/round43g/``. Truth:
``tests/adversarial/torch4_truth.py FILE 2`` (dp 2, gloo, float64, two steps).
"""

from __future__ import annotations

from pathlib import Path

import pytest

ROUND43G = Path(__file__).resolve().parent / "plans" / "round43g"

pytestmark = pytest.mark.slow


def _equivalent(out: dict) -> bool:
    return out["_rc"] == 0 and out.get("verdict") == "EQUIVALENT"


def _prove(name: str, tmp_path: Path) -> dict:
    from tests.adversarial.torch_prove import prove

    return prove(ROUND43G / name, tmp_path)


# -- findings (all three needless refusals, fixed at stop 44) ------------------------------


def test_r43g_1_group_member_outside_root_is_accepted(tmp_path):
    """exit 3 at 94887be (13 s, the group-root refusal); truth right (1.4e-17). Since stop 44
    (a group's units share one root decision, ``fsdp_hold._mates``): EQUIVALENT (53 s)."""
    out = _prove("r43g_01_fsdp_group_member_outside_root_right.py", tmp_path)
    assert _equivalent(out), out


def test_r43g_2_group_with_its_own_parent_is_accepted(tmp_path):
    """exit 3 at 94887be (13 s, the group-root refusal); truth right (5.6e-17). Since stop 44
    (the list's root modules only, as FSDP2's ``_get_root_modules``): EQUIVALENT (53 s)."""
    out = _prove("r43g_02_fsdp_group_with_its_own_parent_right.py", tmp_path)
    assert _equivalent(out), out


def test_r43g_3_tuple_group_under_root_is_accepted(tmp_path):
    """exit 3 at 94887be (6 s, "'tuple' object has no attribute 'set_gradient_divide_factor'");
    truth right (5.6e-17). Since stop 44 (any sequence of modules is a group): EQUIVALENT
    (52 s)."""
    out = _prove("r43g_05_fsdp_tuple_group_under_root_right.py", tmp_path)
    assert _equivalent(out), out


# -- sound outcomes -------------------------------------------------------------------------


def test_r43g_group_of_one_root_is_accepted(tmp_path):
    """``fully_shard([model])``: EQUIVALENT at 94887be (4 goals, 27 s); truth right."""
    out = _prove("r43g_03_fsdp_group_of_one_root_right.py", tmp_path)
    assert _equivalent(out), out


def test_r43g_tuple_group_without_root_is_not_accepted(tmp_path):
    """``fully_shard((w1, w2))`` with no root: exit 3 at 94887be (9 s, AttributeError on the
    tuple); truth: every rank raises ("FSDP requires a single root module")."""
    out = _prove("r43g_04_fsdp_tuple_group_without_root_raises.py", tmp_path)
    assert not _equivalent(out), out


def test_r43g_group_member_called_first_under_root_is_not_accepted(tmp_path):
    """``model.w1(x)`` before ``model(x)``, group ``[w1, w2]`` under the root: exit 3 at
    94887be (9 s, the group-root refusal); truth: every rank raises ("single root module")."""
    out = _prove("r43g_06_fsdp_group_member_called_first_under_root_raises.py", tmp_path)
    assert not _equivalent(out), out
