"""Adversarial round 33b (``tests/adversarial/ATTEMPTS.md``, "Round 33b"), against wip/adv33b at
f2928c8 (= main: R32d-4's fix, stop 33: ``aliasing.c10d_returned``, the tensor a ``c10d`` op
returns is the tensor it was given; ``literals.same_constant``, a captured ``ProcessGroupRef``
compared by mesh axis in ``Traces.constant_differs`` and ``real_ranks``). Plans in
``plans/round33b/``. Truth: ``tests/adversarial/torch4_truth.py FILE 2`` (dp),
``tests/adversarial/tp_truth.py FILE`` (dp x tp); gloo, float64.

* R33b-1 (false accept; ``r33b_01`` dp 2 x tp 2, ``r33b_07`` dp 2): a process group is known by
  its *name* (the world maps ``group_name`` -> axis; the capture records a ``ProcessGroupRef``
  by ``group_name``), and the train file can rename a group
  (``ProcessGroup._set_group_name``): the tp group (r33b_01) or a group of one rank (r33b_07)
  renamed as the dp group is modelled as an all-reduce over dp; the real ``dist.all_reduce``
  runs over the group object. Truth 0.0088 / 0.018 (r33b_01), 0.0067 / 0.010 (r33b_07).
* R33b-2 (false accept; ``r33b_08`` dp 2 x tp 2, ``r33b_09`` tp 2): the same class through
  c10d's registry: a group's name re-registered to another group (``_unregister_process_group``
  / ``_register_process_group``); a functional collective carries the name, which the real run
  resolves to the other group: a hand-written functional DDP over ``mesh["dp"]`` (the dp name
  resolving to tp, truth 0.0088 / 0.018), and torch's own TP (RowwiseParallel's all-reduce, the
  tp name resolving to a group of the rank alone during the step and given back at its end,
  truth 0.0030 / 0.0029; control ``r33b_10`` 2.8e-17, EQUIVALENT).
* R33b-1 and R33b-2 fixed in stop 34 (``spec_lang/torch_frontend/group_identity.py``): a
  ``c10d`` op's group is mapped to its axis by the object the world made (a renamed world
  group is its own axis, another group carrying an axis's name is refused), and at every
  collective recorded an axis's name must resolve in c10d's registry to that object.
* False refusal (``r33b_06`` dp 2, not from the fix): a bucketed hand-written DDP
  (``torch.cat`` of flattened gradients, one all-reduce, copied back by slices) is UNKNOWN
  ("cat along a dim that is a product of named dims"). Truth 2.8e-17.
* Sound: the R32d-4 fix's write-through-the-returned-tensor family (``_foreach_mul_`` on the
  returned views, a view of a view of the returned view, ``.data`` and a second all-reduce).
"""

from __future__ import annotations

from pathlib import Path

import pytest

ROUND33B = Path(__file__).resolve().parent / "plans" / "round33b"


def _not_accepted(out: dict) -> bool:
    """Anything but EQUIVALENT (NOT EQUIVALENT, UNKNOWN or a refusal)."""
    return out["_rc"] != 0 and out.get("verdict") != "EQUIVALENT"


def _equivalent(out: dict) -> bool:
    return out["_rc"] == 0 and out.get("verdict") == "EQUIVALENT"


def _prove(name: str, tmp_path: Path) -> dict:
    from tests.adversarial.torch_prove import prove

    return prove(ROUND33B / name, tmp_path)


# -- findings (R33b-1, R33b-2 fixed in stop 34; strict xfail where open) ------------------------

@pytest.mark.slow
def test_r33b_1_dp_tp_tp_group_renamed_as_dp_is_not_accepted(tmp_path):
    """EQUIVALENT at f2928c8 (4 goals, 156 s); truth w1 0.0088, w2 0.018 on every rank. Fixed
    in stop 34 (``group_identity``): the group constant is the world's tp group object, traced
    as tp whatever its name: NOT EQUIVALENT."""
    out = _prove("r33b_01_dp_tp_tp_group_renamed_as_dp.py", tmp_path)
    assert _not_accepted(out), out


@pytest.mark.slow
def test_r33b_1_dp_singleton_group_renamed_as_dp_is_not_accepted(tmp_path):
    """EQUIVALENT at f2928c8 (4 goals, 106 s); truth w1 0.0067, w2 0.010 after step 1. Fixed in
    stop 34 (``group_identity``): a group that is not the world's carrying the dp axis's name
    is refused (exit 3)."""
    out = _prove("r33b_07_dp_singleton_group_renamed_as_dp.py", tmp_path)
    assert _not_accepted(out), out


@pytest.mark.slow
def test_r33b_2_dp_tp_funcol_dp_name_reregistered_to_tp_is_not_accepted(tmp_path):
    """EQUIVALENT at f2928c8 (110 s); truth w1 0.0088, w2 0.018 on every rank. Fixed in stop 34
    (``group_identity``): the functional all-reduce's dp name resolves to another group when it
    is recorded: refused (exit 3)."""
    out = _prove("r33b_08_dp_tp_funcol_dp_name_reregistered_to_tp.py", tmp_path)
    assert _not_accepted(out), out


@pytest.mark.slow
def test_r33b_2_tp_rowwise_tp_name_reregistered_to_singleton_is_not_accepted(tmp_path):
    """EQUIVALENT at f2928c8 (5 goals, 68 s); truth w1 0.0030, w2 0.0029 on every rank. Fixed
    in stop 34 (``group_identity``): RowwiseParallel's all-reduce resolves the tp name to the
    singleton group when it is recorded (the restore at the step's end comes too late): refused
    (exit 3)."""
    out = _prove("r33b_09_tp_rowwise_tp_name_reregistered_to_singleton.py", tmp_path)
    assert _not_accepted(out), out


@pytest.mark.slow
def test_r33b_dp_flat_bucket_ddp_right_is_equivalent(tmp_path):
    """Truth 2.8e-17; UNKNOWN at f2928c8 (66 s, ``aten.cat`` "along a dim that is a product of
    named dims"). Closed by wip/bucket (``buckets.py``, flat buckets): EQUIVALENT (32 s)."""
    out = _prove("r33b_06_dp_flat_bucket_ddp_right.py", tmp_path)
    assert _equivalent(out), out


# -- sound at f2928c8 (regressions) ------------------------------------------------------------

@pytest.mark.slow
@pytest.mark.parametrize("name", [
    # _foreach_mul_(2.0) on the all-reduced views (truth w1 0.0070, w2 0.0093)
    "r33b_02_dp_foreach_mul_after_view_all_reduce_wrong.py",
    # g.view(p.shape).t().mul_(2.0) after all-reducing g = p.grad.view(-1) (truth 0.0070)
    "r33b_03_dp_view_of_returned_view_mul_wrong.py",
    # .data, divided, then a second all-reduce of the returned tensor (truth 0.0070)
    "r33b_04_dp_data_all_reduce_twice_wrong.py",
])
def test_r33b_writes_through_the_returned_tensor_are_seen(name, tmp_path):
    """NOT EQUIVALENT at f2928c8 (106 s / 68 s / 90 s)."""
    out = _prove(name, tmp_path)
    assert _not_accepted(out), out


@pytest.mark.slow
def test_r33b_dp_tp3_view_ddp_foreach_div_right_is_equivalent(tmp_path):
    """dp 2 x tp 3, views all-reduced over dp and ``_foreach_div_`` (truth 2.8e-17): EQUIVALENT
    at f2928c8 (148 s)."""
    out = _prove("r33b_05_dp_tp3_view_ddp_foreach_div_right.py", tmp_path)
    assert _equivalent(out), out


@pytest.mark.slow
def test_r33b_2_control_tp_name_reregistered_to_itself_is_equivalent(tmp_path):
    """r33b_09's control: the same registry calls, the tp name kept on the tp group (truth
    2.8e-17): EQUIVALENT at f2928c8 (60 s). A fix that refuses any write to c10d's registry by
    the train file may turn this into a refusal, which is acceptable."""
    out = _prove("r33b_10_tp_rowwise_tp_name_reregistered_same_right.py", tmp_path)
    assert _equivalent(out) or out["_rc"] in (2, 3), out     # never NOT EQUIVALENT


@pytest.mark.slow
def test_r33b_1_control_dp_tp_replicated_ddp_right_is_equivalent(tmp_path):
    """r33b_01 without the rename (round 32d's r32d_07, truth 2.8e-17): EQUIVALENT at f2928c8
    (110 s)."""
    from tests.adversarial.torch_prove import prove

    out = prove(ROUND33B.parent / "round32d" / "r32d_07_dp_tp_replicated_ddp_right.py", tmp_path)
    assert _equivalent(out), out
