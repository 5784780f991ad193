"""What the real backend checks when a group is made and the fake one does not is refused even
if caught (``spec_lang/torch_frontend/group_construction.py``; R36d-1, R37a-4, R37a-6..9), in
seconds on a fake world. The slow proves of the plan files are in
``tests/adversarial/test_round36d.py`` and ``test_round37a.py``."""

from __future__ import annotations

import os
from datetime import timedelta

import pytest
import torch.distributed as dist
from torch.distributed.device_mesh import init_device_mesh

from spec_lang.errors import PlanError
from spec_lang.torch_frontend import group_construction as gc
from spec_lang.torch_frontend import new_groups
from spec_lang.torch_frontend.thread_guard import threads_refused
from spec_lang.torch_frontend.world import fake_world

HERE = __file__
MESH = {"dp": 2}


def _caught(fn):
    try:
        fn()
    except Exception:  # noqa: BLE001 -- the train file's fallback
        pass


class _Lying(timedelta):
    """R38a-4: a subclass whose comparisons say "in range" whatever its value."""

    def __ge__(self, other):
        return True

    def __le__(self, other):
        return True


@pytest.mark.parametrize("timeout,ok", [
    (timedelta(minutes=30), True), (timedelta(0), True), (timedelta(days=36500), True),
    (timedelta(seconds=-1), False), (timedelta.max, False), (None, True),
    (_Lying(seconds=-1), False), (_Lying(minutes=30), False), (1800, False),
])
def test_a_timeout_gloo_rejects_is_named(timeout, ok):
    """R37a-6: ``timedelta.max`` is positive in Python and negative in gloo's nanoseconds."""
    with fake_world(MESH, {"dp": 0}):
        assert (gc.why_it_may_raise(timeout) is None) == ok


def test_torchs_own_nccl_knobs_change_nothing_a_gloo_variable_does(monkeypatch):
    """R37a-4: torchtitan sets ``TORCH_NCCL_ASYNC_ERROR_HANDLING`` before making groups: no
    construction fails on it. ``GLOO_SOCKET_IFNAME`` does (R36d-1)."""
    with fake_world(MESH, {"dp": 0}):
        monkeypatch.setenv("TORCH_NCCL_ASYNC_ERROR_HANDLING", "3")
        monkeypatch.setenv("TORCH_NCCL_TRACE_BUFFER_SIZE", "2000")
        assert gc.why_it_may_raise(None) is None
        monkeypatch.setenv("GLOO_SOCKET_IFNAME", "no-such-if0")
        assert "GLOO_SOCKET_IFNAME" in gc.why_it_may_raise(None)


def test_putenv_is_seen(monkeypatch):
    """R37a-8: ``os.putenv`` changes the C environment gloo reads, not ``os.environ``."""
    with fake_world(MESH, {"dp": 0}):
        os.putenv("GLOO_SOCKET_IFNAME", "no-such-if0")
        try:
            assert "GLOO_SOCKET_IFNAME" not in os.environ
            assert "GLOO_SOCKET_IFNAME" in (gc.why_it_may_raise(None) or "")
        finally:
            os.unsetenv("GLOO_SOCKET_IFNAME")
        assert gc.why_it_may_raise(None) is None


def test_the_baseline_is_the_launch_not_the_world(monkeypatch):
    """R37a-7: a variable set after the launch (at the train file's import) and before the world
    is made still differs from the launch's."""
    gc.take_launch_env()
    monkeypatch.setenv("GLOO_DEVICE_TRANSPORT", "nope")       # "at import"
    with fake_world(MESH, {"dp": 0}):
        assert "GLOO_DEVICE_TRANSPORT" in (gc.why_it_may_raise(None) or "")


def test_the_train_files_own_device_mesh_is_checked(monkeypatch):
    """R37a-9: ``init_device_mesh`` of the train file's, with a gloo variable changed, caught:
    refused (device_mesh holds torch's ``new_group`` / ``split_group`` by name)."""
    new_groups.watch()
    with fake_world(MESH, {"dp": 0}):
        monkeypatch.setenv("GLOO_SOCKET_IFNAME", "no-such-if0")
        with pytest.raises(PlanError, match=rf"{HERE}:\d+: a DeviceMesh's (new|split)_group with "
                           r"the environment its backend reads changed"):
            with threads_refused(HERE):
                _caught(lambda: init_device_mesh("cpu", (2, 1), mesh_dim_names=("a", "b")))
        monkeypatch.undo()
        with threads_refused(HERE):           # as launched: made as before
            m = init_device_mesh("cpu", (2, 1), mesh_dim_names=("a", "b"))
        assert m["a"].size() == 2


def test_outside_the_train_files_code_nothing_is_recorded(monkeypatch):
    with fake_world(MESH, {"dp": 0}):
        monkeypatch.setenv("GLOO_SOCKET_IFNAME", "no-such-if0")
        g = dist.new_group([0, 1])             # no capture running: no axis, nothing recorded
        assert new_groups.axis_of(g) == (None, None)
