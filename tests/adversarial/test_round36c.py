"""Adversarial round 36c (``tests/adversarial/ATTEMPTS.md``, "Round 36c"), against wip/adv36c
at 072d231 (= main: round 36's ``fake_answers`` from the merge 0505196: refusing kernels of the
``c10d`` collectives at the keys of real tensors, ``Backend`` methods wrapped, the train file's
own stores and rendezvous refused, ``MASTER_ADDR`` / ``MASTER_PORT`` set, and
``new_groups._met_as_named``). Plans in ``plans/round36c/``. Truth:
``tests/adversarial/torch4_truth.py FILE 1`` (dp), ``tests/adversarial/tp_truth.py FILE``
(dp x tp); gloo, float64.

* R36c-1 (false accept; ``r36c_01``, dp 2 x tp 2): R35d-4's crossed dp rendezvous moved to
  ``ProcessGroupGloo.__init__``, a class only the real run constructs: the capture's groups
  are torch's fake backend, their ``PrefixStore`` objects the right ones, so
  ``_met_as_named`` holds. Truth w1 0.0078 / w2 0.0069 (ranks 0, 1), 0.0067 / 0.0076 (2, 3).
  ``r36c_06``: the same hook set at import crosses the *mesh's* dp groups (``init_device_mesh``
  in the real run), no ``new_group`` at all: not new with round 36.
* R36c-2 (false accept; ``r36c_02``, dp 2): R35d-6's ``TCPStore`` client made in a child
  process (``subprocess.run([sys.executable, "-I", "-c", ...])``): no wrapper there; in the
  capture nothing listens at the ``MASTER_*`` defaults, the error is caught. Truth w1 0.0070.
* R36c-3 (false accept; ``r36c_03``, dp 2): ``dist.monitored_barrier`` raises ValueError on
  the fake backend ("only implemented for GLOO"), passes on gloo; caught, the step takes one
  rank's learning rate in the capture only. Truth w1 0.0070, w2 0.0093.
* R36c-4 (false refusal; ``r36c_04``, dp 2): torchtitan's ``set_determinism`` without a seed
  broadcasts a real seed tensor in ``build_model``: refused (exit 3), although the weights it
  seeds are the proof's symbols. Truth 5.6e-17.
"""

from __future__ import annotations

from pathlib import Path

import pytest

ROUND36C = Path(__file__).resolve().parent / "plans" / "round36c"


def _not_accepted(out: dict) -> bool:
    """Anything but EQUIVALENT (NOT EQUIVALENT, UNKNOWN or a refusal)."""
    return out["_rc"] != 0 and out.get("verdict") != "EQUIVALENT"


def _equivalent(out: dict) -> bool:
    return out["_rc"] == 0 and out.get("verdict") == "EQUIVALENT"


def _prove(name: str, tmp_path: Path) -> dict:
    from tests.adversarial.torch_prove import prove

    return prove(ROUND36C / name, tmp_path)


# -- findings: R36c-1..3 fixed (asserted), R36c-4 open (strict xfail) ---------------------------

@pytest.mark.slow
def test_r36c_1_gloo_init_crossed_is_not_accepted(tmp_path):
    """EQUIVALENT at 072d231 (4 goals, 103 s); truth w1 0.0078 / w2 0.0069 (ranks 0, 1),
    0.0067 / 0.0076 (ranks 2, 3). Fixed (R36c-1): a group made while
    ``ProcessGroupGloo.__init__`` is not torch's is no axis: exit 3 (105 s)."""
    out = _prove("r36c_01_dp_tp_new_group_gloo_init_crossed.py", tmp_path)
    assert out["_rc"] == 3 and "no mesh axis's group" in out["_err"], out


@pytest.mark.slow
def test_r36c_1_mesh_gloo_init_crossed_at_import_is_not_accepted(tmp_path):
    """EQUIVALENT at 072d231 (4 goals, 128 s); truth as r36c_01. Fixed (R36c-1): torch.distributed
    modified when imported is refused: exit 3 (15 s)."""
    out = _prove("r36c_06_dp_tp_mesh_gloo_init_crossed_at_import.py", tmp_path)
    assert out["_rc"] == 3 and "torch.distributed was modified when the train file was " \
        "imported: torch.distributed.distributed_c10d.ProcessGroupGloo.__init__" in out["_err"], out


@pytest.mark.slow
def test_r36c_2_subprocess_tcpstore_is_not_accepted(tmp_path):
    """EQUIVALENT at 072d231 (4 goals, 84 s); truth w1 0.0070, w2 0.0093.
    Fixed (R36c-2): a program started
    in the train file's code is refused: exit 3 (23 s)."""
    out = _prove("r36c_02_dp_subprocess_tcpstore_client_count_lr.py", tmp_path)
    assert out["_rc"] == 3 and "starts a thread or a process (subprocess.Popen)" in out["_err"], \
        out


@pytest.mark.slow
def test_r36c_3_monitored_barrier_caught_is_not_accepted(tmp_path):
    """EQUIVALENT at 072d231 (4 goals, 18 s); truth w1 0.0070, w2 0.0093.
    Fixed (R36c-3): monitored_barrier in the
    train file's code is refused even if caught: exit 3 (21 s)."""
    out = _prove("r36c_03_dp_monitored_barrier_caught_lr.py", tmp_path)
    assert out["_rc"] == 3 and "dist.monitored_barrier: gloo runs it" in out["_err"], out


@pytest.mark.slow
@pytest.mark.xfail(strict=True, reason="R36c-4: torchtitan's set_determinism(seed=None) "
                   "broadcasts a real seed tensor in build_model: a right plan refused")
def test_r36c_4_torchtitan_seed_broadcast_is_equivalent(tmp_path):
    """exit 3 at 072d231 (13 s, "...: a collective on a tensor that is not the step's ...
    c10d::broadcast_ on a real tensor"); truth 5.6e-17."""
    out = _prove("r36c_04_dp_torchtitan_seed_broadcast_barrier_right.py", tmp_path)
    assert _equivalent(out), out


# -- sound or right outcomes worth keeping --------------------------------------------------------

@pytest.mark.slow
def test_r36c_seed_given_barrier_rank_branch_stays_equivalent(tmp_path):
    """r36c_04 with the seed given: a ``dist.barrier()`` over dp and a ``get_rank() == 0``
    branch that prints in the step stay EQUIVALENT (23 s); truth 5.6e-17."""
    out = _prove("r36c_05_dp_seed_given_barrier_rank_branch_right.py", tmp_path)
    assert _equivalent(out), out
