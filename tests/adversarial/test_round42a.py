"""Adversarial round 42a (``tests/adversarial/ATTEMPTS.md``, "Round 42a"), against ppfsdp42 at
8dbe7a1 (PP x FSDP2 with ``pp_data_parallel.AutogradStateGuard``: inside ``schedule.step`` of
a ``fully_shard`` stand-in stage, the autograd state of its parameters is refused from user
code; ``docs/torch.md``, "Pipelining" step 7). Plans in ``plans/round42a/``. Truth:
``tests/torch_frontend/pp_truth.py FILE`` (gloo, float64, one step). Every prove traces the
pipeline's ranks (1-4 min on the shared machine): all slow.
"""

from __future__ import annotations

from pathlib import Path

import pytest

ROUND42A = Path(__file__).resolve().parent / "plans" / "round42a"

pytestmark = pytest.mark.slow


def _not_accepted(out: dict) -> bool:
    """Anything but EQUIVALENT (NOT EQUIVALENT, UNKNOWN or a refusal)."""
    return out["_rc"] != 0 and out.get("verdict") != "EQUIVALENT"


def _equivalent(out: dict) -> bool:
    return out["_rc"] == 0 and out.get("verdict") == "EQUIVALENT"


def _prove(name: str, tmp_path: Path) -> dict:
    from tests.adversarial.torch_prove import prove

    return prove(ROUND42A / name, tmp_path)


# -- findings ---------------------------------------------------------------------------------


def test_r42a_1_grad_read_through_accumulate_grad_node_is_not_accepted(tmp_path):
    """EQUIVALENT at 8dbe7a1 (107 goals, 110 s); truth: all 21 gradients wrong, max 0.0175
    (``output.weight``), update 6.0e-4. Fixed (``AutogradStateGuard``: ``.grad_fn`` of any
    tensor read by user code inside the step): exit 3 (72 s). Since wip/ppleaf (``pp_leaves``:
    the node's ``variable`` is the stage's unsharded leaf, as for real; the ``.grad_fn``
    refusal removed): NOT EQUIVALENT (70 s, 79 goals refuted)."""
    out = _prove("r42a_01_accumulate_grad_node_wrong.py", tmp_path)
    assert out["_rc"] == 1 and out.get("verdict") == "NOT EQUIVALENT", out


def test_r42a_2_grad_read_with_torch_function_disabled_is_not_accepted(tmp_path):
    """EQUIVALENT at 8dbe7a1 (107 goals, 82 s); truth: all 21 gradients wrong, max 0.0175
    (``output.weight``), update 6.0e-4. Fixed (``mode_escapes_refused``): exit 3 (58 s), naming
    ``torch._C.DisableTorchFunction``."""
    out = _prove("r42a_02_disable_torch_function_wrong.py", tmp_path)
    assert out["_rc"] == 3 and "torch._C.DisableTorchFunction inside schedule.step" in out.get(
        "_err", ""), out


def test_r42a_3_identity_keyed_cache_dropped_per_step_is_not_accepted(tmp_path):
    """EQUIVALENT at 8dbe7a1 (107 goals, 64 s); truth: every rank fails in B1 (backward
    through micro-batch 0's freed ``tanh`` node), the single-device step runs. Since wip/ppleaf
    (``pp_leaves``: one leaf per parameter for the step, as FSDP2's unsharded parameter) the
    capture fails where the real run does: exit 3 (81 s), "RuntimeError: Trying to backward
    through the graph a second time"."""
    out = _prove("r42a_08_identity_cache_cleared_gpipe.py", tmp_path)
    assert out["_rc"] == 3 and "backward through the graph a second time" in out.get(
        "_err", ""), out


def test_r42a_4_step_microbatches_called_directly_is_not_accepted(tmp_path):
    """EQUIVALENT at 8dbe7a1 (107 goals, 58 s); truth: all 21 gradients wrong, max 0.0175
    (``output.weight``), update 6.0e-4. Fixed (a stand-in stage's backward outside
    ``schedule.step`` is refused)."""
    out = _prove("r42a_09_step_microbatches_direct_wrong.py", tmp_path)
    assert out["_rc"] == 3 and "outside schedule.step" in out.get("_err", ""), out


# -- sound outcomes ---------------------------------------------------------------------------


def test_r42a_grad_read_in_a_worker_thread_is_refused(tmp_path):
    """exit 3 at 8dbe7a1 (9 s): a thread started while the train file's code is captured
    (R34b-2; the guard, a per-thread mode, would not see it); truth as r42a_01."""
    out = _prove("r42a_06_grad_read_in_thread_wrong.py", tmp_path)
    assert out["_rc"] == 3 and "starts a thread" in out.get("_err", ""), out


def test_r42a_identity_keyed_cache_kept_across_steps_is_not_accepted(tmp_path):
    """UNKNOWN at 8dbe7a1 (89 s; 107 goals proved, open: step-state, the spec's
    ``output._cache`` differs); truth: every rank fails in B1 (backward through micro-batch 0's
    freed ``tanh`` node): sound, by the step-state check."""
    out = _prove("r42a_05_identity_cache_gpipe.py", tmp_path)
    assert _not_accepted(out), out


def test_r42a_hsdp_stage_is_proved(tmp_path):
    """EQUIVALENT at 8dbe7a1 (107 goals, 148 s): pp 2 x dp_replicate 2 x dp_shard 2, FSDP2
    on the 2-D dp mesh, GPipe; truth: right (grad 5.6e-17, update 6.6e-16)."""
    out = _prove("r42a_07_hsdp_pp_right.py", tmp_path)
    assert _equivalent(out), out


def test_r42a_activation_checkpointing_in_a_1f1b_fully_shard_stage_is_proved(tmp_path):
    """EQUIVALENT at 8dbe7a1 (107 goals, 61 s): full AC (``checkpoint_wrapper``) of every
    block of a ``fully_shard`` stage under 1F1B, the recomputation under the guard; truth:
    right (grad 5.6e-17, update 2.8e-16)."""
    out = _prove("r42a_03_ac_1f1b_right.py", tmp_path)
    assert _equivalent(out), out


def test_r42a_tp_fsdp_pp_3d_is_proved(tmp_path):
    """EQUIVALENT at 8dbe7a1 (107 goals, 104 s): pp 2 x dp 2 x tp 2, torchtitan's TP + SP on
    each stage, FSDP2 on the blocks and the stage, GPipe; truth: right (grad 4.2e-17, update
    4.8e-16)."""
    out = _prove("r42a_04_tp_fsdp_pp_3d_right.py", tmp_path)
    assert _equivalent(out), out


def test_r42a_tp_fsdp_pp_3d_with_ac_under_1f1b_is_proved(tmp_path):
    """EQUIVALENT at 8dbe7a1 (107 goals, 158 s): r42a_04 with full AC of every block and
    1F1B; truth: right (grad 4.2e-17, update 4.8e-16)."""
    out = _prove("r42a_10_tp_fsdp_pp_3d_ac_1f1b_right.py", tmp_path)
    assert _equivalent(out), out
