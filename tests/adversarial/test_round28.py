"""Adversarial round 28 (``tests/adversarial/ATTEMPTS.md``, "Round 28"), against the fixes made
for rounds 26 and 27 in ``prove --torch`` (wip/adv28 at 972a73f: ``C10dAllReduce`` refuses
``async_op=True`` and non-contiguous tensors; the train file's ``dist.isend`` / ``irecv`` /
``batch_isend_irecv`` refused in a pipelined step; a stage or schedule built outside
``train_step`` refused; every attribute of the DeviceMesh is step state; ``_reshape_alias``
and ``copy_`` into a view). Plans in ``plans/round28/``; a prove takes 40-150 s on the
shared machine. Truth: ``tests/torch_frontend/pp_truth.py``,
``plans/round26/pp_truth_steps.py`` and ``tests/adversarial/torch4_truth.py`` (gloo, float64).

Fixed in stop 29 and asserted (anything but EQUIVALENT): R28-2 (only the schedule's own
transfers are composed), R28-3 (an all-reduce not issued by ``dist.all_reduce`` is refused),
R28-4 (a stage or schedule that outlives ``train_step`` is refused), R28-6 (an all-reduce of a
list of tensors is not lowered); fixed later (wip/fix30): R28-1 (a read of a functional
collective's buffer before its ``wait_tensor`` is UNKNOWN, ``waits.py``). Open, strict xfail:
R28-5 (state on a torch class: the family of R11-6). The findings:

* R28-1 (``r28_01``, dp, main too): the raw functional op
  ``torch.ops._c10d_functional.all_reduce`` is asynchronous (its output is reduced in the
  background until ``wait_tensor``); the rule makes its output the sum at the node and
  ``wait_tensor`` the identity, so a read before the wait is proved as the sum (truth update
  0.0067 / 0.010).
* R28-2 (``r28_03``, pp 2 x dp 2): ``pg.recv([t], src, tag)`` on the ProcessGroup object (what
  ``dist.irecv`` calls) is not patched: R26-3 again (truth grad 0.393, update 0.197).
* R28-3 (``r28_04``, dp, main too): ``pg.allreduce([g], opts)`` with ``opts.asyncOp = False``:
  the node says synchronous, nothing waits the work (``dist.all_reduce`` waits it in Python);
  gloo reduces in the background (truth update 0.0067 / 0.010); on the pipeline group too
  (``r28_09``, a read before ``work.wait()``: truth grad 0.0018 / 0.0043).
* R28-4 (``r28_07``, pp 2, across steps): the schedule built in the first ``train_step`` and
  cached as a class attribute of torch's ``ScheduleGPipe``: R26-1 again (truth step 2 0.029,
  step 3 0.038).
* R28-6 (``r28_10``, dp, main too; no race): ``pg.allreduce([g1, g2], opts).wait()``, two
  tensors in one call: gloo sums every tensor of the list and every rank into each
  (``gloo_allreduce_two_tensors.py``), the rule reduces each tensor on its own (truth update
  0.0093 / 0.0070).
* R28-5 (``r28_08``, dp, across steps): the bucket of R26-8 cached on ``type(mesh)`` (the
  DeviceMesh class) instead of the instance: the fix reads ``vars(mesh)`` only (truth step 2
  0.014 / 0.019, step 3 0.045 / 0.051).

The rest assert today's right outcomes (refusals of the other hiding places).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.adversarial.torch_prove import prove

ROUND28 = Path(__file__).resolve().parent / "plans" / "round28"

pytestmark = pytest.mark.slow


def _not_accepted(out: dict) -> bool:
    """Anything but EQUIVALENT: NOT EQUIVALENT, UNKNOWN or a refusal (exit 3)."""
    return out["_rc"] != 0 and out.get("verdict") != "EQUIVALENT"


# -- findings (R28-5 open: strict xfail) ---------------------------------------

def test_r28_1_funcol_output_read_before_wait_tensor_is_unknown(tmp_path):
    """Fixed (``waits.py``): the division reading the buffer before ``wait_tensor`` is not
    lowered, naming its line; so both gradients and updates are open (UNKNOWN)."""
    out = prove(ROUND28 / "r28_01_dp_funcol_read_before_wait.py", tmp_path)
    assert _not_accepted(out), out
    assert out["verdict"] == "UNKNOWN", out
    reasons = [o["reason"] for o in out["open"]]
    assert reasons and all("before its wait_tensor" in r and "r28_01_dp_funcol_read_before_"
                           "wait.py:55" in r for r in reasons), reasons


def test_r28_2_process_group_recv_read_before_wait_is_not_accepted(tmp_path):
    out = prove(ROUND28 / "r28_03_pg_recv_method.py", tmp_path)
    assert _not_accepted(out), out


def test_r28_3_process_group_allreduce_never_waited_is_not_accepted(tmp_path):
    out = prove(ROUND28 / "r28_04_pg_allreduce_asyncop_false.py", tmp_path)
    assert _not_accepted(out), out


def test_r28_3_pp_process_group_allreduce_read_before_wait_is_not_accepted(tmp_path):
    out = prove(ROUND28 / "r28_09_pp_pg_allreduce_asyncop_false.py", tmp_path)
    assert _not_accepted(out), out


def test_r28_6_two_tensors_in_one_allreduce_is_not_accepted(tmp_path):
    out = prove(ROUND28 / "r28_10_pg_allreduce_two_tensors.py", tmp_path)
    assert _not_accepted(out), out


def test_r28_4_schedule_cached_on_torch_class_is_not_accepted(tmp_path):
    out = prove(ROUND28 / "r28_07_schedule_cached_on_torch_class.py", tmp_path)
    assert _not_accepted(out), out


@pytest.mark.xfail(strict=True, reason="R28-5: state cached on the DeviceMesh class, not the "
                   "instance, is never compared (R26-8)")
def test_r28_5_bucket_cached_on_mesh_class_is_not_accepted(tmp_path):
    out = prove(ROUND28 / "r28_08_bucket_cached_on_mesh_class.py", tmp_path)
    assert _not_accepted(out), out


# -- right outcomes today -------------------------------------------------------------------

def test_irecv_bound_at_import_is_refused(tmp_path):
    """``from torch.distributed import irecv`` at the top: the file is imported under the
    patch, so the asynchronous-transfer refusal fires (exit 3)."""
    out = prove(ROUND28 / "r28_02_irecv_imported_name.py", tmp_path)
    assert out["_rc"] == 3 and "irecv" in out["_err"], out


@pytest.mark.parametrize("name", [
    "r28_05_schedule_cached_default_arg.py",   # a mutable default of train_step: step state
    "r28_06_schedule_lru_cache.py",            # an lru_cache'd builder: step state
    "r28_11_bucket_cached_on_model_class.py",  # the train file's own class: step state
])
def test_state_cached_in_the_train_file_is_not_accepted(tmp_path, name):
    out = prove(ROUND28 / name, tmp_path)
    assert _not_accepted(out), out
