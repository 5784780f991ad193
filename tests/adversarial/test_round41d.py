"""Adversarial round 41d (``tests/adversarial/ATTEMPTS.md``, "Round 41d"), against wip/sac41 at
e62ea59 (``log_calls`` hardened after round 41b: print only, no arithmetic, no text in a
subscript's index, placeholders only as text, the standard streams as found at import). Plans in
``plans/round41d/``. Truth: ``tests/adversarial/torch4_truth.py FILE 2`` (dp 2, gloo, float64,
two steps); r41d_08: ``tests/torch_frontend/pp_truth.py`` (pp 2 x dp 2).
"""

from __future__ import annotations

from pathlib import Path

import pytest

ROUND41D = Path(__file__).resolve().parent / "plans" / "round41d"


def _not_accepted(out: dict) -> bool:
    """Anything but EQUIVALENT (NOT EQUIVALENT, UNKNOWN or a refusal)."""
    return out["_rc"] != 0 and out.get("verdict") != "EQUIVALENT"


def _equivalent(out: dict) -> bool:
    return out["_rc"] == 0 and out.get("verdict") == "EQUIVALENT"


def _prove(name: str, tmp_path: Path) -> dict:
    from tests.adversarial.torch_prove import prove

    return prove(ROUND41D / name, tmp_path)


# -- findings ---------------------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.xfail(strict=True, reason="R41d-1: the placeholder text, left of `%`, becomes a "
                   "mapping key (`%(key)s`) a local defaultdict inserts")
def test_r41d_1_print_percent_mapping_key_is_not_accepted(tmp_path):
    """EQUIVALENT at e62ea59 (4 goals, 57 s); truth step 1 w1 0.0070, w2 0.0093."""
    out = _prove("r41d_01_dp_print_percent_mapping_key_defaultdict_wrong.py", tmp_path)
    assert _not_accepted(out), out


@pytest.mark.slow
@pytest.mark.xfail(strict=True, reason="R41d-1: the placeholder text reaches a str subclass's "
                   "__rmod__ (the file's code)")
def test_r41d_1_print_str_subclass_rmod_is_not_accepted(tmp_path):
    """EQUIVALENT at e62ea59 (4 goals, 60 s); truth step 1 w1 0.0070, w2 0.0093."""
    out = _prove("r41d_02_dp_print_str_subclass_rmod_wrong.py", tmp_path)
    assert _not_accepted(out), out


@pytest.mark.slow
@pytest.mark.xfail(strict=True, reason="R41d-2: the rewrite's frames (log_call, the arguments' "
                   "lambda) show in a KeyError's traceback the step reads")
def test_r41d_2_print_keyerror_traceback_depth_is_not_accepted(tmp_path):
    """EQUIVALENT at e62ea59 (4 goals, 45 s); truth step 1 w1 0.0070, w2 0.0093."""
    out = _prove("r41d_05_dp_print_keyerror_traceback_depth_wrong.py", tmp_path)
    assert _not_accepted(out), out


@pytest.mark.slow
@pytest.mark.xfail(strict=True, reason="R41d-2: the skip calls a user __str__ from "
                   "log_calls._skipped, the real print from train_step's frame")
def test_r41d_2_print_user_str_caller_frame_is_not_accepted(tmp_path):
    """EQUIVALENT at e62ea59 (4 goals, 75 s); truth step 1 w1 0.0070, w2 0.0093."""
    out = _prove("r41d_04_dp_print_user_str_reads_caller_frame_wrong.py", tmp_path)
    assert _not_accepted(out), out


@pytest.mark.slow
@pytest.mark.xfail(strict=True, reason="R41d-3: the skip takes any tensor as torch-formatted; "
                   "the real print calls a Tensor.__repr__ the file patched")
def test_r41d_3_print_loss_patched_tensor_repr_is_not_accepted(tmp_path):
    """EQUIVALENT at e62ea59 (4 goals, 84 s); truth step 1 w1 0.0070, w2 0.0093."""
    out = _prove("r41d_03_dp_print_loss_patched_tensor_repr_wrong.py", tmp_path)
    assert _not_accepted(out), out


@pytest.mark.slow
@pytest.mark.xfail(strict=True, reason="R41d-3: the skip checks the stream's identity, not its "
                   "`write` (an instance attribute the real print calls)")
def test_r41d_3_print_stdout_write_attribute_is_not_accepted(tmp_path):
    """EQUIVALENT at e62ea59 (4 goals, 82 s); truth step 1 w1 0.014, w2 0.019."""
    out = _prove("r41d_07_dp_print_stdout_write_instance_attr_wrong.py", tmp_path)
    assert _not_accepted(out), out


@pytest.mark.slow
@pytest.mark.xfail(strict=True, reason="R41d-1 on the pipelined path (pp 2 x dp 2): the "
                   "placeholder text becomes a defaultdict key through `%`")
def test_r41d_1_pp_print_percent_mapping_key_is_not_accepted(tmp_path):
    """EQUIVALENT at e62ea59 (12 goals, 190 s); pp_truth params l1.bias 0.131."""
    out = _prove("r41d_08_pp_dp_print_percent_mapping_key_wrong.py", tmp_path)
    assert _not_accepted(out), out


@pytest.mark.slow
@pytest.mark.xfail(strict=True, reason="R41d-4: print wrapped by setup_for_distributed "
                   "(torchvision references, DETR, DeiT, MAE): the loss print is refused")
def test_r41d_4_print_setup_for_distributed_wrapper_is_equivalent(tmp_path):
    """exit 3 at e62ea59 (20 s, TypeError: not a print to the standard output); truth right."""
    out = _prove("r41d_09_dp_print_setup_for_distributed_wrapper_right.py", tmp_path)
    assert _equivalent(out), out


# -- sound outcomes -----------------------------------------------------------------------------


@pytest.mark.slow
def test_r41d_print_loss_common_forms_is_equivalent(tmp_path):
    """EQUIVALENT at e62ea59 (4 goals, 77 s; with `print(f"{loss}")` too: exit 3, R41b-5)."""
    out = _prove("r41d_06_dp_print_loss_common_forms_right.py", tmp_path)
    assert _equivalent(out), out


@pytest.mark.slow
@pytest.mark.xfail(strict=True, reason="R41d-5: the skipped print's stream (a regular file as "
                   "stdout) is read back through its size")
def test_r41d_5_print_stdout_file_size_readback_is_not_accepted(tmp_path):
    """EQUIVALENT at e62ea59 (4 goals, 87 s); truth with stdout a file: w1 0.0070."""
    out = _prove("r41d_10_dp_print_stdout_file_size_readback_wrong.py", tmp_path)
    assert _not_accepted(out), out


@pytest.mark.slow
@pytest.mark.xfail(strict=True, reason="R41d-1: the placeholder text as a `%(key)s` key: KeyError "
                   "in the capture only, caught by the step")
def test_r41d_1_print_percent_mapping_keyerror_is_not_accepted(tmp_path):
    """EQUIVALENT at e62ea59 (4 goals, 83 s); truth step 1 w1 0.0070, w2 0.0093."""
    out = _prove("r41d_11_dp_print_percent_mapping_key_keyerror_wrong.py", tmp_path)
    assert _not_accepted(out), out


@pytest.mark.slow
@pytest.mark.xfail(strict=True, reason="R41b-5 with a spec: print(f'loss {loss:.4f}') of the 0-d "
                   "loss tensor is refused (Tensor.__format__ is not the statement's frame)")
def test_r41b_5_print_loss_tensor_format_spec_is_equivalent(tmp_path):
    """exit 3 at e62ea59 (27 s, t.__format__ read); truth right."""
    out = _prove("r41d_12_dp_print_loss_tensor_format_spec_right.py", tmp_path)
    assert _equivalent(out), out
