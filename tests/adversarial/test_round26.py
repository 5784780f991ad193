"""Adversarial round 26 (``tests/adversarial/ATTEMPTS.md``, "Round 26"), against the pipelining
path of ``prove --torch`` after round 23's fixes (wip/adv26 at 7d54f5a). Plans in
``plans/round26/`` (the round-22 MLP / tied embedding-head pipelines, pp 2 or pp 2 x dp 2, and
two data-parallel-only MLPs), so a prove takes 30-80 s. Truth: ``tests/torch_frontend/
pp_truth.py`` (gloo, float64, one process per rank), ``plans/round26/pp_truth_steps.py`` (the
same over K consecutive steps), ``tests/adversarial/torch4_truth.py`` (dp only, K steps).

Fixed (stop 29) and asserted with their outcome: R26-1 (a stage or schedule built outside
train_step is refused; one cached on the DeviceMesh is UNKNOWN, the mesh's attributes being
step state), R26-2 (``_reshape_alias`` with other strides UNKNOWN), R26-3 / R26-5 (the train
file's ``dist.isend`` / ``irecv`` refused in a pipelined step), R26-4 (``all_reduce`` with
``async_op=True`` UNKNOWN), R26-8 (the mesh's attributes). Open, strict xfails: R26-6 (now a
refusal, exit 3, naming the rule) and R26-7. The findings:

* R26-1 (``r26_03``): a schedule built once in ``parallelize`` (kept across steps) reuses its
  receive buffers, which are the last stage's input *leaves*: a tensor hook registered on the
  received activation in the stage forward stays on the buffer, so step 2 runs each hook twice
  (truth: step 1 exact, step 2 grad:l0 0.029). Step 1 alone is traced; the step-state
  fingerprint reads torch's objects by their public plain attributes only, and the three
  public flags torch sets in step 1 are set by the file in ``parallelize``. Without those
  lines (``r26_01``) the verdict is UNKNOWN (the stage's flags change): asserted here.
  The same without touching torch's flags (``r26_12``): the stage and schedule built in the first
  train_step and cached on the DeviceMesh object (not compared): EQUIVALENT, the same truth.
* R26-8 (``r26_13``, data-parallel only, on main too): state cached on the DeviceMesh is not
  compared at all: a per-parameter communication buffer built on step 1, cached on the mesh,
  and filled with ``add_`` (never zeroed): step 1 right, step 2 off by 0.014 / 0.019.
* R26-2 (``r26_04``, data-parallel only, on main too): ``aten._reshape_alias(x, size, stride)``
  is lowered as ``view(x, size)``, its stride never read (truth 0.0086 / 0.012).
* R26-3 (``r26_05``): a buffer of ``dist.irecv`` read before ``work.wait()``: the composed
  program writes the receive where it is posted (truth grad:emb 0.39).
* R26-4 (``r26_06``, data-parallel only, on main too): a gradient read between
  ``dist.all_reduce(..., async_op=True)`` and ``work.wait()`` is read as reduced (truth 0.0067
  / 0.010).
* R26-5 (``r26_07``): a ``dist.isend`` buffer overwritten before ``work.wait()``: the composed
  program takes the sent value where the send is posted (truth grad:emb 0.39).
* R26-6 (``r26_09``, a false refusal): the same persistent schedule with nothing depending on
  the step is UNKNOWN (step-state).
* R26-7 (``r26_11``, minor, a wrong NOT EQUIVALENT by the documented rule "every copy is
  compared"): every rank keeps the whole model and runs only its stage's layers; the copies a
  rank never reads stay stale (truth: used copies exact, unused ones 0.05-0.15 off) and are
  refuted at stage 0's ``l1.bias``.

Passing: ``r26_01`` (R26-1's plain form, UNKNOWN), ``r26_08`` (EQUIVALENT, right), ``r26_10``
(NOT EQUIVALENT, right).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.adversarial.torch_prove import prove

ROUND26 = Path(__file__).resolve().parent / "plans" / "round26"

pytestmark = pytest.mark.slow


def _not_equivalent(out: dict) -> None:
    """The right outcome of a file that trains differently for real: anything but EQUIVALENT
    (NOT EQUIVALENT, UNKNOWN, or a refusal)."""
    assert out["_rc"] in (1, 2, 3) and out.get("verdict") != "EQUIVALENT", out


def test_persistent_schedule_with_a_recv_hook_is_not_proved(tmp_path):
    """R26-1's plain form (truth step 2 grad:l0.weight 0.029): refused (a stage built outside
    train_step); any outcome but EQUIVALENT is right."""
    _not_equivalent(prove(ROUND26 / "r26_01_persistent_schedule_recv_hook.py", tmp_path))


@pytest.mark.xfail(strict=True, reason="R26-6 open (false refusal): a schedule built once in "
                   "parallelize is refused (exit 3: built outside train_step)")
def test_persistent_schedule_right_is_equivalent(tmp_path):
    """R26-6: torchtitan's pattern, nothing depending on the step (truth 5.6e-17 over 2
    steps). A fix must not reopen R26-1 (hooks on the reused receive buffers). Today refused
    (a stage built outside train_step)."""
    out = prove(ROUND26 / "r26_09_persistent_schedule_right.py", tmp_path)
    assert out["verdict"] == "EQUIVALENT" and out["_rc"] == 0, out


def test_two_steps_on_one_schedule_with_a_recv_hook_is_not_equivalent(tmp_path):
    """Within one traced step the receive buffers' hooks accumulate as for real (torch's own
    code runs): two schedule.step calls, NOT EQUIVALENT (plan = 3/4 x spec; truth 0.075)."""
    out = prove(ROUND26 / "r26_10_two_steps_one_schedule_hook.py", tmp_path)
    assert out["verdict"] == "NOT EQUIVALENT" and out["_rc"] == 1, out


def test_data_written_by_the_last_stage_only_is_equivalent(tmp_path):
    """R23-6's fix, the other direction: the last stage tempers its own copy of a batch entry
    stage 0 never reads (right: truth 5.6e-17)."""
    out = prove(ROUND26 / "r26_08_data_written_by_last_stage_right.py", tmp_path)
    assert out["verdict"] == "EQUIVALENT" and out["_rc"] == 0, out


def test_persistent_schedule_with_flags_set_is_not_equivalent(tmp_path):
    """R26-1: truth step 1 exact, step 2 grad:l0.weight 0.029 (hooks run twice). Fixed: a
    stage built outside train_step is refused."""
    out = prove(ROUND26 / "r26_03_persistent_schedule_flags_set2.py", tmp_path)
    assert out["_rc"] == 3 and "PipelineStage built outside train_step" in out["_err"], out


def test_reshape_alias_with_other_strides_is_not_equivalent(tmp_path):
    """R26-2: a column-major reading of the gradient through _reshape_alias (truth 0.0086).
    Fixed: UNKNOWN, the strides named."""
    out = prove(ROUND26 / "r26_04_reshape_alias_strides.py", tmp_path)
    assert out["verdict"] == "UNKNOWN" and out["_rc"] == 2, out
    assert any("not the row-major strides" in o["explanation"] for o in out["open"]), out


def test_irecv_buffer_read_before_wait_is_not_equivalent(tmp_path):
    """R26-3: stage 0 adds the irecv buffer before waiting (truth grad:emb.weight 0.39).
    Fixed: the train file's asynchronous transfers are refused."""
    out = prove(ROUND26 / "r26_05_irecv_read_before_wait.py", tmp_path)
    assert out["_rc"] == 3 and "dist.irecv in the train file" in out["_err"], out


def test_async_all_reduce_read_before_wait_is_not_equivalent(tmp_path):
    """R26-4: the gradient read before the async all-reduce is waited on (truth 0.0067).
    Fixed: an all-reduce with async_op=True is not lowered (UNKNOWN)."""
    out = prove(ROUND26 / "r26_06_async_allreduce_read_before_wait.py", tmp_path)
    assert out["verdict"] == "UNKNOWN" and out["_rc"] == 2, out
    assert any("async_op=True" in o["explanation"] for o in out["open"]), out


def test_isend_buffer_overwritten_before_wait_is_not_equivalent(tmp_path):
    """R26-5: the last stage zeroes its isend buffer before waiting (truth grad:emb 0.39).
    Fixed: refused, as R26-3."""
    out = prove(ROUND26 / "r26_07_isend_buffer_reused_before_wait.py", tmp_path)
    assert out["_rc"] == 3 and "dist.isend in the train file" in out["_err"], out


@pytest.mark.xfail(strict=True, reason="R26-7 open (minor): a copy its stage never reads is "
                   "compared with the spec's final value")
def test_unused_copies_of_other_stages_layers_are_not_refuted(tmp_path):
    """R26-7: right for real (the stale copies are never read); EQUIVALENT, or UNKNOWN / a
    refusal naming the unused copy, would be right, NOT EQUIVALENT is not."""
    out = prove(ROUND26 / "r26_11_full_model_on_every_stage_right.py", tmp_path)
    assert out.get("verdict") != "NOT EQUIVALENT" and out["_rc"] != 1, out


def test_schedule_cached_on_the_mesh_is_not_equivalent(tmp_path):
    """R26-1, natural form: truth step 1 exact, step 2 grad:l0.weight 0.029. Fixed: the
    DeviceMesh's attributes are step state (UNKNOWN, naming the cache)."""
    out = prove(ROUND26 / "r26_12_schedule_cached_on_mesh.py", tmp_path)
    assert out["verdict"] == "UNKNOWN" and out["_rc"] == 2, out
    assert any("the DeviceMesh's _pp_cache" in o["explanation"] for o in out["open"]), out


def test_bucket_cached_on_the_mesh_is_not_equivalent(tmp_path):
    """R26-8: truth step 1 5.6e-17, step 2 w1 0.014 / w2 0.019, step 3 0.045 / 0.051. Fixed:
    the DeviceMesh's attributes are step state."""
    out = prove(ROUND26 / "r26_13_bucket_cached_on_mesh.py", tmp_path)
    assert out["verdict"] == "UNKNOWN" and out["_rc"] == 2, out
    assert any("the DeviceMesh's" in o["explanation"] for o in out["open"]), out
