"""Adversarial round 37b (``tests/adversarial/ATTEMPTS.md``, "Round 37b"), against wip/r37 at
d782147 (round 37's bucket accumulation: ``buckets.piece_write`` / ``zero_bucket`` /
``split_dims``; round 37a's fixes: ``thread_guard.children_now``, ``group_construction``;
R35d-2's ``value_reads``). Plans in ``plans/round37b/``. Truth:
``tests/adversarial/torch4_truth.py FILE 1`` (dp 2, gloo, float64).
"""

from __future__ import annotations

from pathlib import Path

import pytest

ROUND37B = Path(__file__).resolve().parent / "plans" / "round37b"


def _not_accepted(out: dict) -> bool:
    """Anything but EQUIVALENT (NOT EQUIVALENT, UNKNOWN or a refusal)."""
    return out["_rc"] != 0 and out.get("verdict") != "EQUIVALENT"


def _equivalent(out: dict) -> bool:
    return out["_rc"] == 0 and out.get("verdict") == "EQUIVALENT"


def _prove(name: str, tmp_path: Path) -> dict:
    from tests.adversarial.torch_prove import prove

    return prove(ROUND37B / name, tmp_path)


# -- sound outcomes (asserted) ------------------------------------------------------------------

@pytest.mark.slow
def test_r37b_01_int64_main_grad_buffer_copy_is_not_accepted(tmp_path):
    """UNKNOWN at d782147 (63 s): the copy into the int64 piece is a cast, not lowered."""
    out = _prove("r37b_01_dp_megatron_int64_main_grad_copy_truncates_wrong.py", tmp_path)
    assert _not_accepted(out), out


@pytest.mark.slow
def test_r37b_04_hash_of_item_caught_is_not_accepted(tmp_path):
    """exit 3 at d782147 (33 s): the hash guards on the unbacked SymFloat (R35a-3)."""
    out = _prove("r37b_04_dp_hash_of_item_caught_lr_wrong.py", tmp_path)
    assert _not_accepted(out), out


@pytest.mark.slow
def test_r37b_07_new_group_with_tag_bad_ifname_is_not_accepted(tmp_path):
    """NOT EQUIVALENT at d782147 (68 s): the direct call raised in the capture too."""
    out = _prove("r37b_07_dp_new_group_with_tag_bad_ifname_caught_wrong.py", tmp_path)
    assert _not_accepted(out), out


@pytest.mark.slow
def test_r37b_09_main_grad_zeroed_between_microbatches_is_not_accepted(tmp_path):
    """exit 3 at d782147 (89 s): the literal micro-batch slice."""
    out = _prove("r37b_09_dp_megatron_main_grad_zeroed_between_microbatches_wrong.py", tmp_path)
    assert _not_accepted(out), out


@pytest.mark.slow
def test_r37b_11_main_grad_zeroed_between_whole_microbatches_is_not_accepted(tmp_path):
    """UNKNOWN at d782147 (104 s): zero_ of the bucket not lowered. Since R37b-4's fix the zero_
    is lowered: NOT EQUIVALENT (65 s)."""
    out = _prove("r37b_11_dp_megatron_main_grad_zeroed_between_whole_microbatches_wrong.py",
                 tmp_path)
    assert out["_rc"] == 1 and out.get("verdict") == "NOT EQUIVALENT", out


@pytest.mark.slow
def test_r37b_13_alias_snapshot_before_add_is_not_accepted(tmp_path):
    """NOT EQUIVALENT at d782147 (49 s): the snapshot view reads the written piece."""
    out = _prove("r37b_13_dp_megatron_main_grad_alias_snapshot_before_add_wrong.py", tmp_path)
    assert _not_accepted(out), out


# -- findings: R37b-2 (data_ptr), R37b-3, R37b-4 fixed (asserted); R37b-1, R37b-2 (pickle) open

@pytest.mark.slow
@pytest.mark.xfail(strict=True, reason="R37b-1: a process cloned with CLONE_PARENT (a sibling: "
                   "not in this process's child counters) is not refused")
def test_r37b_1_clone_parent_tcpstore_is_not_accepted(tmp_path):
    """EQUIVALENT at d782147 (4 goals, 119 s); truth w1 0.0070, w2 0.0093."""
    out = _prove("r37b_02_dp_clone_parent_tcpstore_client_count_lr.py", tmp_path)
    assert _not_accepted(out), out


@pytest.mark.slow
def test_r37b_2_tensorbase_data_ptr_caught_is_not_accepted(tmp_path):
    """EQUIVALENT at d782147 (4 goals, 87 s); truth w1 0.0070, w2 0.0093.
    Fixed (R37b-2, ``value_reads`` wraps ``torch.Tensor``'s reads too): exit 3 (37 s)."""
    out = _prove("r37b_03_dp_tensorbase_data_ptr_caught_lr_wrong.py", tmp_path)
    assert out["_rc"] == 3 and "the step reads a value of its fake tensors (t.data_ptr)" \
        in out["_err"], out


@pytest.mark.slow
def test_r37b_3_foreach_add_duplicate_piece_is_not_accepted(tmp_path):
    """EQUIVALENT at d782147 (66 s); truth w1 0.0070, w2 0.0.
    Fixed (R37b-3, ``aliasing.written_twice``): UNKNOWN (113 s)."""
    out = _prove("r37b_05_dp_megatron_main_grad_foreach_add_duplicate_piece_wrong.py", tmp_path)
    assert out["_rc"] == 2 and out.get("verdict") == "UNKNOWN", out


@pytest.mark.slow
def test_r37b_3_foreach_div_duplicate_grad_is_not_accepted(tmp_path):
    """EQUIVALENT at d782147 (66 s); truth w1 0.0035, w2 0.0.
    Fixed (R37b-3): UNKNOWN (95 s)."""
    out = _prove("r37b_06_dp_foreach_div_duplicate_grad_wrong.py", tmp_path)
    assert out["_rc"] == 2 and out.get("verdict") == "UNKNOWN", out


@pytest.mark.slow
@pytest.mark.xfail(strict=True, reason="known (r36b_01: not the bucket rules): the right two-micro-"
                   "batch main_grad plan is refused for its literal micro-batch slice x[:h]")
def test_r37b_08_main_grad_two_microbatches_is_equivalent(tmp_path):
    """exit 3 at d782147 (85 s); truth 0 / 0 (right)."""
    out = _prove("r37b_08_dp_megatron_main_grad_two_microbatches_zeroed_right.py", tmp_path)
    assert _equivalent(out), out


@pytest.mark.slow
def test_r37b_4_main_grad_zeroed_then_two_microbatches_is_equivalent(tmp_path):
    """UNKNOWN at d782147 (96 s); truth 0 / 0 (right).
    Fixed (R37b-4, ``buckets.filled``: zero_ of a bucket is the bucket of zeros): EQUIVALENT
    (61 s)."""
    out = _prove("r37b_10_dp_megatron_main_grad_two_whole_microbatches_zeroed_right.py", tmp_path)
    assert _equivalent(out), out


@pytest.mark.slow
def test_r37b_2_pickle_dumps_grad_caught_is_not_accepted(tmp_path):
    """EQUIVALENT at d782147 (94 s); truth w1 0.0070, w2 0.0093. Fixed (round 38,
    ``value_reads.PICKLES``: pickling a fake tensor with the train file on the stack is
    refused, raising or not): exit 3 at line 49 (42 s)."""
    out = _prove("r37b_12_dp_pickle_dumps_grad_caught_lr_wrong.py", tmp_path)
    assert out["_rc"] == 3 and "r37b_12_dp_pickle_dumps_grad_caught_lr_wrong.py:49: the step " \
        "reads a value of its fake tensors (t.__reduce_ex__)" in out["_err"], out
