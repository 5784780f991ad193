"""Issue 11: a ``dist.new_group`` of exactly a mesh axis's ranks is that axis
(``spec_lang/torch_frontend/new_groups.py``; docs/torch.md, the group identity paragraph).
Plans in ``plans/issue11/``. Truth: ``tests/adversarial/torch4_truth.py FILE 2`` (dp),
``tests/adversarial/tp_truth.py FILE`` (tp, dp x tp); gloo, float64. Before the fix every
collective on such a group was UNKNOWN ("process group '...' is not one of the mesh's axes").

* ``g11_01`` (dp 2, right): mlp_ddp's gradient all-reduce over ``new_group(ranks=[0, 1])``.
  Truth w1 0.0, w2 2.8e-17. EQUIVALENT (4 goals, 68 s).
* ``g11_02`` (dp 2 x tp 2, right): a Megatron-style MLP (column- then row-parallel, the tp
  all-reduce in an autograd Function), tp and dp groups made as Megatron's ``parallel_state``
  does. Truth 2.8e-17 on every rank. EQUIVALENT (4 goals, 138 s).
* ``g11_03`` (dp 2 x tp 2, wrong): g11_02 with the dp group picked from the tp groups. Truth
  0.011 on every rank. NOT EQUIVALENT (4 refuted, not a constant factor, 202 s).
* ``g11_04`` (dp 2 x tp 2, wrong): the dp gradient all-reduce over ``new_group([0, 1, 2, 3])``
  (the whole world). Truth 0.0093. Never EQUIVALENT: the group is no axis, UNKNOWN (194 s).
* ``g11_05`` (tp 2, right): a column-parallel layer, its output features all-gathered
  (``dist.all_gather_into_tensor``) over ``new_group([0, 1])``. Truth 0.0. UNKNOWN (129 s),
  not for the group: the c10d all-gather has no lowering rule (nor its backward's block of the
  group rank). The order of a group's ranks is checked by the unit tests
  (``tests/torch_frontend/test_new_groups.py``: ``sort_ranks=False`` in another order is no axis).
* ``g11_06`` (tp 2, wrong): g11_05 over ``new_group([1, 0], sort_ranks=False)``: the chunks in
  the other order. Truth 0.028. UNKNOWN (150 s): never EQUIVALENT.
* ``g11_07`` (dp 2 x tp 2): each rank makes only its own dp group (``new_group([r % 2,
  r % 2 + 2])``): every rank's group is its dp ranks, but torch pairs the two different groups
  as one (both are the first group made). Refused, exit 3 (``new_groups.check_traces``).
"""

from __future__ import annotations

from pathlib import Path

import pytest

ISSUE11 = Path(__file__).resolve().parent / "plans" / "issue11"


def _prove(name: str, tmp_path: Path) -> dict:
    from tests.adversarial.torch_prove import prove

    return prove(ISSUE11 / name, tmp_path)


def _equivalent(out: dict) -> bool:
    return out["_rc"] == 0 and out.get("verdict") == "EQUIVALENT"


def _unknown_on_the_group(out: dict) -> bool:
    return out["_rc"] == 2 and out.get("verdict") == "UNKNOWN" and out["open"] and all(
        "is not one of the mesh's axes" in o["reason"] for o in out["open"])


@pytest.mark.slow
@pytest.mark.parametrize("name", ["g11_01_dp_new_group_ddp_right.py",
                                  "g11_02_dp_tp_megatron_mlp_right.py"])
def test_new_group_of_an_axis_is_the_axis(name, tmp_path):
    out = _prove(name, tmp_path)
    assert _equivalent(out), out


@pytest.mark.slow
def test_dp_group_of_the_tp_ranks_is_refuted(tmp_path):
    out = _prove("g11_03_dp_tp_dp_group_of_tp_ranks_wrong.py", tmp_path)
    assert out["_rc"] == 1 and out["verdict"] == "NOT EQUIVALENT", out
    cx = out["counterexample"]
    assert cx["ratio"] is None and "not a constant factor" in cx["explanation"], cx
    assert out["counts"]["refuted"] == 4


@pytest.mark.slow
def test_whole_world_group_stays_unknown(tmp_path):
    out = _prove("g11_04_dp_tp_world_group_wrong.py", tmp_path)
    assert _unknown_on_the_group(out), out


@pytest.mark.slow
@pytest.mark.parametrize("name", ["g11_05_tp_all_gather_group_right.py",
                                  "g11_06_tp_all_gather_reversed_wrong.py"])
def test_c10d_all_gather_stays_unknown(name, tmp_path):
    """No rule for ``c10d._allgather_base_`` (either order): UNKNOWN, never EQUIVALENT."""
    out = _prove(name, tmp_path)
    assert out["_rc"] == 2 and out["verdict"] == "UNKNOWN", out
    assert any("_allgather_base_" in o["reason"] for o in out["open"]), out


@pytest.mark.slow
def test_groups_made_differently_on_the_ranks_are_refused(tmp_path):
    out = _prove("g11_07_dp_tp_each_rank_own_group_refused.py", tmp_path)
    assert out["_rc"] == 3 and "same order" in out["_err"], out
