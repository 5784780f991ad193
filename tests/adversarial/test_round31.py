"""Adversarial round 31 (``tests/adversarial/ATTEMPTS.md``, "Round 31"), against wip/adv31 at
0f22574 (= main: R30c-1 ``op_guard`` in ``dist.all_reduce`` and the schedule transfers, R30-2 b
``pp_guard.held_by``). Plans in ``plans/round31/``. Truth: ``tests/adversarial/torch4_truth.py
FILE 2`` (dp), ``tests/torch_frontend/pp_truth.py FILE`` (pp); gloo, float64.

* R31-1 (false accept; ``r31_01`` dp 2, ``r31_03`` pp 2): code of the train file that runs
  inside the call and *returns before any node is recorded* is never on the op's path, so
  ``op_guard.watching`` cannot see it; ``op_guard.tampered`` does not look at ``Work``, and
  ``pp_guard``'s snapshot (which covers ``torch._C._distributed_c10d.Work.wait``) is compared
  only before the call, at the schedule's actions and when the step returned. A replaced
  ``torch.Tensor.is_complex`` (asked by ``dist.all_reduce`` / ``dist.irecv`` after the guard)
  sets ``Work.wait`` (pp: the wait of every ``Work`` class, ``FakeWork`` included) to a no-op
  that puts the very original back; the real work is never (dp) or only at the end of the
  step (pp) waited. Truth dp update 0.0067 / 0.010 (control ``r31_02`` 5.6e-17); pp grad
  l0.weight 0.056, l1.weight 0.20 (control ``r31_04`` <= 5.6e-17).
* R31-2 (false accept; ``r31_05`` dp 2, ``r31_06`` pp 2, ``r31_08`` FSDP2 dp 2): the train
  file registers, at import, its own CPU kernel of a c10d op (``torch.library.Library("c10d",
  "IMPL")``: ``allreduce_``, ``recv_``, ``_reduce_scatter_base_``) that hands back an
  already-completed Work (and reduces / receives nothing in time). The capture traces on meta /
  fake tensors, where torch's Meta kernel runs: nothing of the train file runs while the step
  is traced, and nothing compares the dispatcher's kernels. Truth dp 0.0067 / 0.010; pp grad
  l0.weight 0.10, l1.weight 5.5e+256 (garbage read); FSDP2 0.0067 / 0.0080. Not only c10d:
  ``r31_10`` overrides ``aten::div_.Tensor`` on CPU (the gradient left undivided), truth
  0.0070 / 0.0093.
"""

from __future__ import annotations

from pathlib import Path

import pytest

ROUND31 = Path(__file__).resolve().parent / "plans" / "round31"


def _not_accepted(out: dict) -> bool:
    """Anything but EQUIVALENT: NOT EQUIVALENT, UNKNOWN or a refusal (exit 3)."""
    return out["_rc"] != 0 and out.get("verdict") != "EQUIVALENT"


def _equivalent(out: dict) -> bool:
    return out["_rc"] == 0 and out.get("verdict") == "EQUIVALENT"


def _prove(name: str, tmp_path: Path) -> dict:
    from tests.adversarial.torch_prove import prove

    return prove(ROUND31 / name, tmp_path)


# -- findings (strict xfail: the right outcome asserted) ---------------------------------------

@pytest.mark.slow
def test_r31_1_dp_work_wait_swapped_in_is_complex_is_not_accepted(tmp_path):
    """EQUIVALENT at 0f22574 (4 goals, 36 s); truth update 0.0067 / 0.010. Fixed in stop 31
    (op_guard.work_changes at every node recorded in the call): exit 3 naming Work.wait."""
    out = _prove("r31_01_dp_work_wait_swapped_in_is_complex.py", tmp_path)
    assert _not_accepted(out) and out["_rc"] == 3, out


@pytest.mark.slow
@pytest.mark.xfail(strict=True, reason="R31-1 (pp): the swap keys on torch's frame names "
                   "(`_batch_p2p`, `irecv`), which the capture's patched transfers do not have: "
                   "it never happens while traced (a train file that detects the capture, the "
                   "R29-4 family); still EQUIVALENT after stop 31's Work check")
def test_r31_1_pp_work_wait_swapped_in_is_complex_is_not_accepted(tmp_path):
    """EQUIVALENT at 0f22574 (9 goals, 37 s) and after stop 31's fix (35 s); truth grad
    l0.weight 0.056, l1.weight 0.20."""
    out = _prove("r31_03_pp_work_wait_swapped_in_is_complex.py", tmp_path)
    assert _not_accepted(out), out


@pytest.mark.slow
def test_r31_2_dp_library_cpu_allreduce_impl_is_not_accepted(tmp_path):
    """EQUIVALENT at 0f22574 (4 goals, 29 s); truth update 0.0067 / 0.010."""
    out = _prove("r31_05_dp_library_cpu_allreduce_impl.py", tmp_path)
    assert _not_accepted(out) and out["_rc"] == 3, out
    # (since round 32: the IMPL library of torch's namespace is named first, at import)
    assert "c10d::allreduce_" in out["_err"] or "namespace 'c10d'" in out["_err"], out
    assert "r31_05_dp_library_cpu_allreduce_impl.py:" in out["_err"], out


@pytest.mark.slow
def test_r31_2_pp_library_cpu_recv_impl_is_not_accepted(tmp_path):
    """EQUIVALENT at 0f22574 (9 goals, 139 s); truth grad l0.weight 0.10, l1.weight 5.5e+256."""
    out = _prove("r31_06_pp_library_cpu_recv_impl.py", tmp_path)
    assert _not_accepted(out) and out["_rc"] == 3, out
    # (since round 32: the IMPL library of torch's namespace is named first, at import)
    assert "c10d::recv_" in out["_err"] or "namespace 'c10d'" in out["_err"], out
    assert "r31_06_pp_library_cpu_recv_impl.py:" in out["_err"], out


@pytest.mark.slow
def test_r31_2_fsdp_library_cpu_reduce_scatter_impl_is_not_accepted(tmp_path):
    """EQUIVALENT at 0f22574 (67 s); truth update 0.0067 / 0.0080."""
    out = _prove("r31_08_fsdp_library_cpu_reduce_scatter_impl.py", tmp_path)
    assert _not_accepted(out) and out["_rc"] == 3, out
    # (since round 32: the IMPL library of torch's namespace is named first, at import)
    assert "c10d::_reduce_scatter_base_" in out["_err"] or "namespace 'c10d'" in out["_err"], out
    assert "r31_08_fsdp_library_cpu_reduce_scatter_impl.py:" in out["_err"], out


@pytest.mark.slow
def test_r31_2_dp_library_cpu_aten_div_impl_is_not_accepted(tmp_path):
    """EQUIVALENT at 0f22574 (60 s); truth update 0.0070 / 0.0093 (2x the gradient)."""
    out = _prove("r31_10_dp_library_cpu_aten_div_impl.py", tmp_path)
    assert _not_accepted(out) and out["_rc"] == 3, out
    # (since round 32: the IMPL library of torch's namespace is named first, at import)
    assert "aten::div_.Tensor" in out["_err"] or "namespace 'aten'" in out["_err"], out
    assert "r31_10_dp_library_cpu_aten_div_impl.py:" in out["_err"], out


# -- false refusal (strict xfail asserting EQUIVALENT) -----------------------------------------

@pytest.mark.slow
def test_r31_all_reduce_in_grad_hook_right_is_accepted(tmp_path):
    """UNKNOWN at 0f22574 (73 s: the hook registered and removed inside train_step left
    ``_post_accumulate_grad_hooks`` on the parameter); right (truth 5.6e-17 / 0.0). EQUIVALENT
    at fbe17b3 (61 s) and since: the strict xfail was stale (found in stop 50's slow run)."""
    out = _prove("r31_09_dp_all_reduce_in_grad_hook_right.py", tmp_path)
    assert _equivalent(out), out


# -- controls (false refusals since the R31-1 fix) and right outcomes ----------------------------------------------------------------------

@pytest.mark.slow
@pytest.mark.xfail(strict=True, reason="false refusal since stop 31's R31-1 fix: any Work "
                   "attribute replaced during a guarded call is refused, a wait that waits too")
def test_r31_control_dp_work_wait_swapped_waiting_is_accepted(tmp_path):
    """r31_01 whose swapped wait waits: right (truth 5.6e-17); EQUIVALENT (69 s)."""
    out = _prove("r31_02_dp_work_wait_swapped_control.py", tmp_path)
    assert _equivalent(out), out


@pytest.mark.slow
def test_r31_control_pp_work_wait_swapped_waiting_is_accepted(tmp_path):
    """r31_03 whose swapped wait waits: right (truth <= 5.6e-17); EQUIVALENT (133 s). A false
    refusal after stop 31's R31-1 fix; EQUIVALENT again at c0cac14 (68 s: found by a slow run
    at stop 39, the strict xfail had gone stale)."""
    out = _prove("r31_04_pp_work_wait_swapped_control.py", tmp_path)
    assert _equivalent(out), out


@pytest.mark.slow
def test_r31_mode_code_in_torch_named_module_is_refused(tmp_path):
    """r30c_01's mode with its code exec'd in a module registered as ``torch._...``: refused
    (exit 3) by the op guard at 0f22574 (the author's listed gap did not open in this form)."""
    out = _prove("r31_07_dp_mode_code_in_torch_named_module.py", tmp_path)
    assert _not_accepted(out) and out["_rc"] == 3, out
    assert "torch._shardproof_r31_done_work:9 (__torch_dispatch__)" in out["_err"], out
