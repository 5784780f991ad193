"""Adversarial round 22 (``tests/adversarial/ATTEMPTS.md``, "Round 22"), against the new
pipelining path of ``prove --torch`` (wip/pp2 at e25e511: ``PipelineStage`` +
``ScheduleGPipe`` / ``Schedule1F1B`` x hand-written DP; ``docs/torch.md``, "Pipelining").

The plans are small (a 2-layer MLP, pp 2 x dp 2, ``plans/round22/``) so one prove takes
40-130 s; the gloo truth is ``tests/torch_frontend/pp_truth.py`` (float64, one process per
rank).

* R22-1 (fixed) **false accept**: torch's real schedule runs the DYNAMIC metadata inference
  (no user metadata): one extra forward of every stage and, on the last stage, one extra call
  of ``loss_fn`` (``_backward_metadata_inference``) before micro-batch 0. prove --torch used to
  bypass it (STATIC), so ``r22_01`` (GPipe, 2 mb) and ``r22_05`` (1F1B, 4 mb), which scale the
  loss of call n+1 (micro-batch n-1 for real), were EQUIVALENT; truth grad 0.19-0.42 /
  0.09-0.11. Now torch's inference is traced (``pp_capture``): NOT EQUIVALENT. ``r22_20``: the
  metadata forward of the last stage reads ``torch.empty`` receive buffers (garbage); a buffer
  recording them is not EQUIVALENT (it would be, were they modelled as micro-batch 0).
* R22-2 (fixed) **false accept**: the derived metadata gave every floating activation
  ``requires_grad=True`` (and the capture made every parameter trainable); torch's real
  metadata says what stage s-1's output requires. With a frozen first stage the received
  activation does not require grad: ``r22_07`` (a branch on ``h.requires_grad``) NOT
  EQUIVALENT, ``r22_10`` (a reentrant ``torch.utils.checkpoint``: ``l1`` gets no gradient for
  real) refused, "the parallel step does not produce ['grad:l1.weight', ...]"; the right frozen
  first stage ``r22_19`` EQUIVALENT.
* R22-4 (fixed) **false accept** and wrong NOT EQUIVALENT: ``pp_merge`` read a tied weight's
  copies on two stages from *one* placeholder, so an in-place write on one stage (the
  optimizer's update) was seen by the other stage's copy. Now one placeholder per copy:
  ``r22_18`` (the head's copy never stepped; truth 0.27) NOT EQUIVALENT at ``head.weight``,
  ``r22_16`` (right, truth 2.2e-16) EQUIVALENT, ``r22_17`` (wrong factor) NOT EQUIVALENT.
  Since round 26 the three are refused (their own ``dist.send`` / ``recv``; below).
* R22-3 (fixed) false refusal: a stage forward writing the model's buffer in place
  (``r22_06``, the stage holding it as a plain attribute: ``self.seen = model.seen``; right,
  truth 5.6e-17) crashed the capture ("Please convert all Tensors to FakeTensors first"): now
  EQUIVALENT; ``r22_02`` (a forward counter, 1 + 1/n for real) NOT EQUIVALENT.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.adversarial.torch_prove import prove

ROUND22 = Path(__file__).resolve().parent / "plans" / "round22"

pytestmark = pytest.mark.slow


# right pipelines (gloo truth <= 5.6e-17): the base, 3 stages, scale_grads=False with the
# user's own 1/n, the mesh axes in the other order
@pytest.mark.parametrize("name", ["r22_00_mlp_pp_dp.py", "r22_08_three_stages_right.py",
                                  "r22_11_manual_mb_scale_right.py",
                                  "r22_13_dp_outer_right.py"])
def test_right_pipelines_are_equivalent(name, tmp_path):
    out = prove(ROUND22 / name, tmp_path)
    assert out.get("verdict") == "EQUIVALENT" and out["_rc"] == 0, out


# wrong pipelines the path handles (truth: 0.029, 0.36): a middle stage halving the gradient it
# sends upstream (NOT EQUIVALENT), labels paired with the next micro-batch (UNKNOWN)
@pytest.mark.parametrize("name", ["r22_09_three_stages_mid_hook.py",
                                  "r22_12_target_rolled_one_mb.py"])
def test_wrong_pipelines_are_not_proved(name, tmp_path):
    out = prove(ROUND22 / name, tmp_path)
    assert out.get("verdict") != "EQUIVALENT" and out["_rc"] != 0, out


# R22-1 (fixed): torch's metadata inference calls loss_fn once more than the micro-batches
@pytest.mark.parametrize("name", ["r22_01_loss_call_count.py",
                                  "r22_05_loss_call_count_1f1b.py"])
def test_loss_fn_called_by_metadata_inference_is_not_equivalent(name, tmp_path):
    out = prove(ROUND22 / name, tmp_path)
    assert out.get("verdict") == "NOT EQUIVALENT" and out["_rc"] == 1, out


def test_metadata_forward_on_receive_buffers_is_not_known(tmp_path):
    """R22-1 fix: the last stage's metadata forward reads torch.empty buffers; a buffer that
    keeps what it read is not proved (it would be were they micro-batch 0's activation)."""
    out = prove(ROUND22 / "r22_20_metadata_forward_reads_garbage.py", tmp_path)
    assert out.get("verdict") != "EQUIVALENT" and out["_rc"] in (1, 2), out


# R22-2 (fixed): a received activation requires grad as stage s-1's output does
def test_received_activation_requires_grad_as_torch_derives_it(tmp_path):
    out = prove(ROUND22 / "r22_07_requires_grad_branch.py", tmp_path)
    assert out.get("verdict") == "NOT EQUIVALENT" and out["_rc"] == 1, out


def test_frozen_stage_checkpoint_without_grad_is_refused(tmp_path):
    """Reentrant checkpoint on an input that does not require grad: for real ``l1`` gets no
    gradient (truth); the plan has none either, the spec has: refused, naming them."""
    out = prove(ROUND22 / "r22_10_frozen_stage_checkpoint.py", tmp_path)
    assert out["_rc"] == 3 and "leaves no gradient on ['l1.weight'" in out["_err"], out


def test_frozen_first_stage_is_equivalent(tmp_path):
    out = prove(ROUND22 / "r22_19_frozen_stage_right.py", tmp_path)
    assert out.get("verdict") == "EQUIVALENT" and out["_rc"] == 0, out


# R22-4 (fixed): each stage's copy of a tied weight is its own tensor. These files sum the
# copies' gradients with the train file's own dist.send / recv, refused since round 26 (where
# the work of a transfer the train file issues is waited is not traced): r22_16 (right) is a
# false refusal; the same per-stage copies are proved with dist.all_reduce over pp
# (examples/torch/gpt2_pp_tied.py; round 23's r23_13b / r23_14b; round 27)
@pytest.mark.parametrize("name", ["r22_18_tied_copy_not_stepped.py",
                                  "r22_16_tied_p2p_sync_right.py",
                                  "r22_17_tied_p2p_sync_wrong_factor.py"])
def test_tied_copies_synced_by_the_train_files_own_transfers_are_refused(name, tmp_path):
    out = prove(ROUND22 / name, tmp_path)
    assert out["_rc"] == 3 and "transfers a tensor that the schedule does not" in out["_err"], out


# R22-3 (fixed): a stage forward writing the model's buffer in place is traced as it runs
def test_buffer_written_in_stage_forward_is_captured(tmp_path):
    out = prove(ROUND22 / "r22_06_buffer_fill_right.py", tmp_path)
    assert out.get("verdict") == "EQUIVALENT" and out["_rc"] == 0, out


def test_buffer_counting_the_metadata_forward_is_not_equivalent(tmp_path):
    out = prove(ROUND22 / "r22_02_buffer_fwd_count.py", tmp_path)
    assert out.get("verdict") == "NOT EQUIVALENT" and out["_rc"] == 1, out


# minor (a09, a10): one-line refusals naming the line, no crash
def test_uneven_micro_batches_are_refused_naming_the_step_line(tmp_path):
    out = prove(ROUND22 / "r22_04_uneven_microbatches.py", tmp_path)
    assert out["_rc"] == 3 and "r22_04_uneven_microbatches.py:74: schedule.step's argument 0 " \
        "has a local batch of 4 (dim 0), which does not divide into 3 equal micro-batches" \
        in out["_err"], out


def test_a_stage_without_an_optimizer_is_refused_naming_build_optimizer(tmp_path):
    out = prove(ROUND22 / "r22_21_param_free_stage.py", tmp_path)
    assert out["_rc"] == 3 and "r22_21_param_free_stage.py:46: build_optimizer returned " \
        "NoneType, not a torch.optim.Optimizer" in out["_err"], out
