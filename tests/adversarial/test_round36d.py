"""Round 36d: adversarial review of round 36a's fixes to ``new_groups.py`` (072d231: a
``new_group`` ``backend=`` taken only as a plain ``str`` naming gloo and made on the fake world's
backend; ``_tampered`` compares ``vars(dist.Backend)``, ``vars(BackendConfig)`` and the default
group's ``pg_map`` entry), of 5143365 (``fully_shard`` / ``replicate`` over a mesh dim that is
no world axis refused) and of the message-only ``thread_guard.value_hint`` /
``note(thread=False)``. ``tests/adversarial/ATTEMPTS.md``, "Round 36d". Plans in
``plans/round36d/``; truth ``tests/adversarial/torch4_truth.py FILE 1`` (dp 2, gloo, float64).

* R36d-1 (false accept): gloo raises in the real run where the fake backend does not
  (``GLOO_SOCKET_IFNAME`` naming no interface, ``timeout=timedelta(seconds=-1)``); the capture
  drops ``backend="gloo"`` and makes the group, so a train file that catches the error takes
  another path in the real run only (round 36a's premise "gloo raises nothing the fake one
  does not" is false).
* R36d-2 (false accept): ``ProcessGroupGloo.__init__`` replaced on torch's pybind class around
  the ``new_group`` call (a rank alone in its group); never called in the capture, not compared
  by ``_tampered``. Also without ``backend=`` (R36d-3): the real world's backend class is
  constructed for a plain ``new_group`` too.
"""

from __future__ import annotations

from pathlib import Path

import pytest

ROUND36D = Path(__file__).resolve().parent / "plans" / "round36d"


def _prove(name: str, tmp_path: Path) -> dict:
    from tests.adversarial.torch_prove import prove

    return prove(ROUND36D / name, tmp_path)


def _not_accepted(out: dict) -> bool:
    """Anything but EQUIVALENT (NOT EQUIVALENT, UNKNOWN or a refusal)."""
    return out["_rc"] != 0 and out.get("verdict") != "EQUIVALENT"


def _equivalent(out: dict) -> bool:
    return out["_rc"] == 0 and out.get("verdict") == "EQUIVALENT"


# -- findings R36d-1..3: fixed (asserted) ------------------------------------------------------

@pytest.mark.slow
def test_r36d_1_gloo_bad_ifname_caught_is_not_accepted(tmp_path):
    """EQUIVALENT at 072d231 (26 s); truth w1 0.0088, w2 0.018 (no gradient all-reduce).
    Fixed (R36d-1): the backend's
    environment changed since the launch is refused even if caught: exit 3 (20 s)."""
    out = _prove("r36d_03_dp_gloo_bad_ifname_caught_wrong.py", tmp_path)
    assert out["_rc"] == 3 and "changed since the launch (GLOO_SOCKET_IFNAME)" in out["_err"], out


@pytest.mark.slow
def test_r36d_1_gloo_negative_timeout_caught_is_not_accepted(tmp_path):
    """EQUIVALENT at 072d231 (82 s loaded); truth w1 0.0088, w2 0.018.
    Fixed (R36d-1): a negative timeout
    is refused even if caught: exit 3 (15 s)."""
    out = _prove("r36d_07_dp_gloo_negative_timeout_caught_wrong.py", tmp_path)
    assert out["_rc"] == 3 and "dist.new_group with a negative timeout (-1 s)" in out["_err"], out


@pytest.mark.slow
def test_r36d_2_gloo_init_replaced_is_not_accepted(tmp_path):
    """EQUIVALENT at 072d231 (59 s loaded); truth w1 0.0067, w2 0.010 (a no-op group).
    Fixed (R36d-2): with ``__init__`` not
    torch's the group is made as asked, gloo on the fake store, which fails: exit 3 (14 s)."""
    out = _prove("r36d_04_dp_gloo_init_replaced_solo_wrong.py", tmp_path)
    assert out["_rc"] == 3, out


@pytest.mark.slow
def test_r36d_3_plain_new_group_backend_init_replaced_is_not_accepted(tmp_path):
    """EQUIVALENT at 072d231 (64 s loaded); truth w1 0.0067, w2 0.010. Fixed (R36d-3): a group made
    while ``__init__`` is not torch's is no axis: UNKNOWN (60 s)."""
    out = _prove("r36d_09_dp_plain_new_group_gloo_init_replaced_wrong.py", tmp_path)
    assert out["_rc"] == 2 and out.get("verdict") == "UNKNOWN", out


# -- sound outcomes (asserted) ------------------------------------------------------------------

@pytest.mark.slow
def test_gloo_group_avg_is_equivalent(tmp_path):
    """``ReduceOp.AVG`` over the gloo duplicate (torch 2.13's gloo has AVG; the caught SUM
    fallback never runs); truth 5.6e-17 / 0.0. EQUIVALENT at 072d231 (23 s)."""
    out = _prove("r36d_01_dp_gloo_avg_caught_sum_right.py", tmp_path)
    assert _equivalent(out), out


@pytest.mark.slow
def test_fsdp_over_own_init_device_mesh_is_equivalent(tmp_path):
    """FSDP2 over the train file's own ``init_device_mesh(..., ("dp",))`` (the default group,
    the world's dp group); truth 5.6e-17 / 0.0. EQUIVALENT at 072d231 (63 s loaded)."""
    out = _prove("r36d_05_fsdp_own_init_device_mesh_dp_right.py", tmp_path)
    assert _equivalent(out), out


@pytest.mark.slow
def test_fsdp_over_from_group_list_reversed_mesh_is_equivalent(tmp_path):
    """FSDP2 over ``DeviceMesh.from_group([dp group], mesh=[1, 0], ("dp",))``: the world's
    group object; FSDP2 shards by the group's rank. Truth 5.6e-17 / 0.0. EQUIVALENT at 072d231
    (67 s loaded)."""
    out = _prove("r36d_06_fsdp_from_group_list_reversed_mesh.py", tmp_path)
    assert _equivalent(out), out


@pytest.mark.slow
def test_gloo_group_on_one_rank_mesh_group_on_other_is_refused(tmp_path):
    """Rank 0 all-reduces over the gloo duplicate, rank 1 over the mesh's dp group: the real
    run never pairs them (a hang). Exit 3 at 072d231 (109 s loaded)."""
    out = _prove("r36d_08_dp_gloo_on_rank0_mesh_group_on_rank1_hangs.py", tmp_path)
    assert out["_rc"] == 3 and "both the mesh's 'dp' group" in out["_err"], out


@pytest.mark.slow
def test_fsdp_over_from_group_list_size_one_mesh_is_refused(tmp_path):
    """FSDP2 over ``DeviceMesh.from_group([dp group], mesh=[this rank], ("dp",))``: a mesh of
    size 1 over a group of 2. The real run crashes (IndexError in FSDP2's chunks). Exit 3 at
    072d231 (42 s): the capture fails too."""
    out = _prove("r36d_10_fsdp_from_group_list_own_rank_mesh.py", tmp_path)
    assert out["_rc"] == 3, out
