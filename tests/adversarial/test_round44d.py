"""Round 44d: break stop 44's last fixes (the stand-in's FSDP2 hooks placed as ``fully_shard``
places its own, inputs wrapped on entering the forward pass, ``param_attrs`` refusing tensors);
``tests/adversarial/ATTEMPTS.md``, "Round 44d". Plans in ``plans/round44d/``. Truth:
``tests/adversarial/torch4_truth.py FILE 2`` (dp 2, gloo, float64).
"""

from __future__ import annotations

from pathlib import Path

import pytest

ROUND44D = Path(__file__).resolve().parent / "plans" / "round44d"

pytestmark = pytest.mark.slow


def _prove(name: str, tmp_path: Path) -> dict:
    from tests.adversarial.torch_prove import prove

    return prove(ROUND44D / name, tmp_path)


def _not_accepted(out: dict) -> bool:
    return out["_rc"] in (1, 2, 3) and out.get("verdict") != "EQUIVALENT"


def test_r44d_1_prepend_pre_hook_after_fully_shard(tmp_path):
    """prepend=True pre-hook on w2 registered after fully_shard scales the input by 2 when
    ``isinstance(mod.weight, DTensor)`` (real: before FSDP2's unshard, yes). Truth wrong (w1
    0.0245, w2 0.0237); EQUIVALENT at ca63c6f (4 goals, 44 s). Since stop 44 (hook slots held
    at the call, ``fsdp_backward.hook_slots``): NOT EQUIVALENT (26 s)."""
    out = _prove("r44d_01_prepend_pre_hook_after_fully_shard_sees_sharded_wrong.py", tmp_path)
    assert out["_rc"] == 1 and out.get("verdict") == "NOT EQUIVALENT", out


def test_r44d_2_prepend_forward_hook_after_fully_shard(tmp_path):
    """prepend=True forward hook on w2 registered after fully_shard scales by 2 when the weight
    is not a DTensor (real: before FSDP2's reshard, plain). Truth wrong (w1 0.0245, w2 0.0237);
    EQUIVALENT at ca63c6f (4 goals, 42 s). Since stop 44: NOT EQUIVALENT (21 s)."""
    out = _prove("r44d_02_prepend_forward_hook_after_fully_shard_sees_unsharded_wrong.py",
                 tmp_path)
    assert out["_rc"] == 1 and out.get("verdict") == "NOT EQUIVALENT", out


def test_r44d_3_replicate_prepend_pre_hook(tmp_path):
    """FSDP-based replicate; a prepend=True pre-hook on the root after the call sees the
    replicated DTensor for real. Truth wrong (w1 0.034, w2 0.033); EQUIVALENT at ca63c6f (33 s);
    since stop 44: NOT EQUIVALENT (13 s)."""
    out = _prove("r44d_06_replicate_prepend_pre_hook_after_call_wrong.py", tmp_path)
    assert out["_rc"] == 1 and out.get("verdict") == "NOT EQUIVALENT", out


@pytest.mark.parametrize("name", [
    "r44d_03_prepend_pre_hook_in_train_step_second_step_wrong.py",
    "r44d_04_global_pre_hook_sees_sharded_wrong.py",
    "r44d_05_global_forward_hook_sees_unsharded_wrong.py",
    "r44d_07_group_prepend_pre_hook_on_second_member_wrong.py",
    "r44d_08_forward_hook_removed_and_readded_after_call_wrong.py",
    "r44d_13_partial_group_forward_late_identity_wrong.py",
])
def test_r44d_sound(name, tmp_path):
    """Wrong plans (truth w1 0.0245, w2 0.0237) not accepted at ca63c6f: r44d_03 exit 3 (hook
    left by train_step), the others NOT EQUIVALENT (26-52 s; r44d_13 truth
    w1 0.0070, w2 0.0093, NOT EQUIVALENT 45 s)."""
    assert _not_accepted(_prove(name, tmp_path))


@pytest.mark.parametrize("name", [
    "r44d_11_param_attr_namespace_twin_identity_wrong.py",
    "r44d_12_param_attr_weakref_twin_identity_wrong.py",
])
def test_r44d_4_param_attr_tensor_in_opaque_container(name, tmp_path):
    """``w1.weight.meta = SimpleNamespace(twin=w2.weight)`` / ``w1.weight.twin =
    weakref.ref(w2.weight)``, re-pointed to w1 in parallelize (DDP-style replicate). Truth wrong
    (w1 0.0086, w2 0.0118); EQUIVALENT at ca63c6f (30 s / 29 s). Since stop 44 (marks limited
    to plain values, ``param_attrs._plain``): exit 3 (7 s)."""
    out = _prove(name, tmp_path)
    assert out["_rc"] == 3 and "R44d-4" in out["_err"], out


@pytest.mark.parametrize("name", [
    "r44d_09_prepend_pre_hook_after_fully_shard_right.py",
    "r44d_10_prepend_forward_hook_after_fully_shard_right.py",
])
def test_r44d_5_prepend_hooks_right_are_equivalent(name, tmp_path):
    """Right plans (truth 2.8e-17): NOT EQUIVALENT at ca63c6f (31 s each); since stop 44:
    EQUIVALENT (26 / 27 s)."""
    out = _prove(name, tmp_path)
    assert out["_rc"] == 0 and out.get("verdict") == "EQUIVALENT", out
