"""Round 36a: adversarial review of round 36's change to ``new_groups.py`` (5f66967: a
``new_group(ranks, backend=X)`` with X one of torch's own backends made on the fake world's
backend, R35c-3; ``use_local_synchronization=True`` groups left out of ``check_traces``'s order
comparison, R35c-5). ``tests/adversarial/ATTEMPTS.md``, "Round 36a". Plans in
``plans/round36a/``; truth ``tests/adversarial/torch4_truth.py FILE 1`` (dp 2),
``tests/adversarial/tp_truth.py FILE`` (dp 2 x tp 2); gloo, float64.

* R36a-1 (false accept): a ``str`` subclass whose value is ``"gloo"`` and whose ``upper()``
  says ``"FAKE"``: ``_builtin_backend`` reads the value, torch's ``Backend(x)`` calls
  ``x.upper()``; the real dp group is a no-op ``FakeProcessGroup``.
* R36a-2 (false accept): a plain ``backend="gloo"`` that torch resolves to ``"fake"`` because
  the train file changed a class attribute of ``dist.Backend`` that ``_backend_registry`` does
  not read (``__new__``, ``GLOO``) around the call; the capture never resolves the string.
* R36a-4 (false accept): torch refuses ``backend="mpi"`` with ``use_local_synchronization=True``
  (ValueError, every build); the capture drops the backend and makes the group, so a train file
  that catches the error takes another path in the real run only.
* R36a-3 (false refusal): ``backend=dist.get_backend()`` (the world's backend) is ``"fake"`` in
  the capture, not one of torch's names: the group is no axis, UNKNOWN.
"""

from __future__ import annotations

from pathlib import Path

import pytest

ROUND36A = Path(__file__).resolve().parent / "plans" / "round36a"


def _prove(name: str, tmp_path: Path) -> dict:
    from tests.adversarial.torch_prove import prove

    return prove(ROUND36A / name, tmp_path)


def _not_accepted(out: dict) -> bool:
    """Anything but EQUIVALENT (NOT EQUIVALENT, UNKNOWN or a refusal)."""
    return out["_rc"] != 0 and out.get("verdict") != "EQUIVALENT"


def _equivalent(out: dict) -> bool:
    return out["_rc"] == 0 and out.get("verdict") == "EQUIVALENT"


# -- findings (fixed in round 36: asserted; open: strict xfail) --------------------------------

@pytest.mark.slow
def test_r36a_1_str_subclass_backend_is_not_accepted(tmp_path):
    """EQUIVALENT at a88d2d1 (4 goals, 68 s); truth w1 0.0067, w2 0.010. Fixed in round 36:
    UNKNOWN since the fix (24 s): ``_builtin_backend`` takes a ``str`` itself only."""
    out = _prove("r36a_01_dp_gloo_str_subclass_upper_fake_wrong.py", tmp_path)
    assert _not_accepted(out), out


@pytest.mark.slow
def test_r36a_2_backend_new_replaced_is_not_accepted(tmp_path):
    """EQUIVALENT at a88d2d1 (4 goals, 94 s loaded); truth w1 0.0067, w2 0.010. Fixed in
    round 36: UNKNOWN since the fix (16 s): ``_tampered`` compares ``vars(dist.Backend)``."""
    out = _prove("r36a_02_dp_gloo_backend_new_replaced_fake_wrong.py", tmp_path)
    assert _not_accepted(out), out


@pytest.mark.slow
def test_r36a_2_backend_gloo_attribute_is_not_accepted(tmp_path):
    """EQUIVALENT at a88d2d1 (4 goals, 59 s); truth w1 0.0067, w2 0.010. Fixed in round 36:
    UNKNOWN since the fix (24 s): ``_tampered`` compares ``vars(dist.Backend)``."""
    out = _prove("r36a_03_dp_backend_gloo_attribute_fake_wrong.py", tmp_path)
    assert _not_accepted(out), out


@pytest.mark.slow
@pytest.mark.xfail(strict=True, reason="R36a-3: backend=dist.get_backend() is 'fake' in the "
                   "capture, so the world's own backend named is no axis (false refusal)")
def test_r36a_3_world_backend_named_is_equivalent(tmp_path):
    """UNKNOWN at a88d2d1 (exit 2, 60 s); truth w1 5.6e-17, w2 0.0 (right)."""
    out = _prove("r36a_04_dp_backend_get_backend_right.py", tmp_path)
    assert _equivalent(out), out


@pytest.mark.slow
def test_r36a_4_torch_validation_skipped_is_not_accepted(tmp_path):
    """EQUIVALENT at a88d2d1 (4 goals, 27 s); truth w1 0.0067, w2 0.010. Fixed in round 36:
    NOT EQUIVALENT since the fix (31 s): only gloo is made on the fake backend; ``mpi`` is
    made as asked and fails in the capture too."""
    out = _prove("r36a_08_dp_mpi_local_sync_raises_in_real_run_wrong.py", tmp_path)
    assert _not_accepted(out), out


# -- sound outcomes (asserted) ------------------------------------------------------------------

@pytest.mark.slow
def test_local_group_named_differently_by_its_members_is_refused(tmp_path):
    """A local dp group made right after a count-named tp group that only one of its members
    is in: its members hash different ``len(pg_names)``; the real run deadlocks. Exit 3 at
    a88d2d1 (66 s)."""
    out = _prove("r36a_05_dp_tp_count_and_local_groups_interleaved_hangs.py", tmp_path)
    assert out["_rc"] == 3 and "different dist.new_group groups" in out["_err"], out


@pytest.mark.slow
def test_count_named_tp_and_members_only_local_dp_is_equivalent(tmp_path):
    """Count-named tp groups made by every rank, local dp groups by their members after them;
    truth 6.9e-18. EQUIVALENT at a88d2d1 (4 goals, 29 s)."""
    out = _prove("r36a_06_dp_tp_count_tp_local_dp_members_only_right.py", tmp_path)
    assert _equivalent(out), out


@pytest.mark.slow
def test_cpu_gloo_device_map_backend_is_equivalent(tmp_path):
    """``new_group(ranks, backend="cpu:gloo")`` used for the step; truth 5.6e-17 / 0.0.
    EQUIVALENT at a88d2d1 (4 goals, 19 s)."""
    out = _prove("r36a_07_dp_device_map_backend_right.py", tmp_path)
    assert _equivalent(out), out
