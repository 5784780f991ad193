"""``spec_lang.torch_frontend.dispatcher_guard``: a train file's own kernel of an existing op
is a change (adversarial round 31, R31-2), a torch module's own definitions and the train
file's own namespace are not. Each registration is removed again (``Library._destroy``) so the
worker's other tests see torch's kernels."""

from __future__ import annotations

import warnings

import pytest

torch = pytest.importorskip("torch")

from spec_lang.torch_frontend import dispatcher_guard as dg  # noqa: E402


@pytest.fixture
def snap():
    return dg.DispatcherSnapshot()


def _lib(ns: str, kind: str):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return torch.library.Library(ns, kind)


def test_nothing_changed_is_no_change(snap):
    assert dg.kernel_changes(snap) == []
    assert dg.kernel_changes(snap, prefixes=dg.COLLECTIVE_NAMESPACES) == []


def test_a_cpu_kernel_of_an_existing_aten_op_is_a_change_naming_op_key_and_line(snap):
    lib = _lib("aten", "IMPL")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            lib.impl("sinc", lambda x: x, "CPU")
        found = dg.kernel_changes(snap)
        assert any(f.startswith("aten::sinc's CPU kernel registered at ")
                   and "test_dispatcher_guard.py:" in f for f in found), found
        # only the collective namespaces: aten is not looked at
        assert dg.kernel_changes(snap, prefixes=dg.COLLECTIVE_NAMESPACES) == []
    finally:
        lib._destroy()
    assert dg.kernel_changes(snap) == []


def test_a_cpu_kernel_of_a_c10d_op_is_a_change_in_the_collective_check(snap):
    import torch.distributed  # noqa: F401  (c10d's ops)

    snap = dg.DispatcherSnapshot()
    lib = _lib("c10d", "IMPL")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            lib.impl("barrier", lambda *a: None, "CPU")
        found = dg.kernel_changes(snap, prefixes=dg.COLLECTIVE_NAMESPACES)
        assert len(found) >= 1 and all(f.startswith("c10d::barrier's CPU") for f in found), found
    finally:
        lib._destroy()


def test_a_new_overload_in_torchs_namespace_is_a_change_its_own_namespace_is_not(snap):
    own, aten = _lib("shardproof_test_ns", "DEF"), _lib("aten", "FRAGMENT")
    try:
        own.define("twice(Tensor x) -> Tensor")
        own.impl("twice", lambda x: 2 * x, "CPU")
        assert dg.kernel_changes(snap) == []
        aten.define("sinc.shardproof_test(Tensor x) -> Tensor")
        found = dg.kernel_changes(snap)
        assert len(found) == 1 and found[0].startswith(
            "a new operator aten::sinc.shardproof_test in torch's namespace"), found
    finally:
        own._destroy()
        aten._destroy()


def test_a_python_kernel_of_the_train_file_is_a_change_torchs_own_is_not(snap):
    from spec_lang.torch_frontend import op_guard

    op = torch.ops.aten.sinc.default
    was = op_guard._BASELINE[0]
    op_guard._BASELINE[0] = op_guard.Baseline()
    try:
        ns: dict = {}           # a train file's function: its code made after the baseline
        exec(compile("def mine(*a, **k):\n    return a[0]\n", "train.py", "exec"), ns)
        mine = ns["mine"]
        key = torch._C.DispatchKey.CPU
        assert key not in op.py_kernels
        op.py_kernels[key] = mine
        try:
            found = dg.kernel_changes(snap)
            assert any(f.startswith("aten::sinc's Python kernel py_kernels.")
                       and "mine" in f for f in found), found
        finally:
            del op.py_kernels[key]
        assert dg.kernel_changes(snap) == []
        # torch's own function in a new slot is torch's kernel
        op.py_kernels[key] = torch._refs.sinc
        try:
            assert dg.kernel_changes(snap) == []
        finally:
            del op.py_kernels[key]
    finally:
        op_guard._BASELINE[0] = was


def test_registration_sites_in_torchs_files_only_are_torchs():
    import os

    here = os.path.join(os.path.dirname(torch.__file__), "library.py")
    assert dg._torch_file(f"{here}:12")
    assert not dg._torch_file(f"{__file__}:3")
    assert not dg._torch_file("/__w/pytorch/pytorch/torch/csrc/distributed/c10d/Ops.cpp:552")
    assert not dg._torch_file(os.path.join(os.path.dirname(torch.__file__), "nope.py") + ":1")


def test_a_library_made_and_destroyed_after_the_snapshot_is_a_change():
    """R32-4: every ``torch.library`` library made after the snapshot is logged when it is made
    (``torch._C._dispatch_library`` wrapped), so one destroyed again before the check is seen;
    the train file's own namespace (``DEF``) is not a change."""
    with dg.installed() as snap:
        lib = _lib("aten", "IMPL")
        lib._destroy()
        own = _lib("shardproof_test_ns2", "DEF")
        own._destroy()
        found = dg.kernel_changes(snap)
    assert len(found) == 1 and found[0].startswith(
        "a torch.library IMPL library of torch's namespace 'aten' made at ") \
        and "test_dispatcher_guard.py:" in found[0], found
    # torch as it was after the block (``installed``)
    from torch._ops import HigherOrderOperator
    assert torch._C._dispatch_library is dg._LIBRARY and dg._SNAPSHOT[0] is None
    assert isinstance(torch._C._EnablePythonDispatcher, type)  # the class, not the wrapper
    assert HigherOrderOperator.__init__.__qualname__ == "HigherOrderOperator.__init__"


def test_the_python_dispatcher_left_enabled_is_a_change(snap):
    """R32-3: the Python dispatcher runs ``py_kernels`` / ``_dispatch_cache`` in the real run;
    left enabled by the train file outside the capture, it is refused."""
    guard = torch._C._EnablePythonDispatcher()
    try:
        found = dg.kernel_changes(snap)
    finally:
        del guard
    assert found and found[0].startswith("the Python dispatcher enabled"), found
    assert dg.kernel_changes(snap) == []


def test_the_python_dispatcher_enabled_by_the_train_file_is_logged():
    """R32b-2: enabling the Python dispatcher from the train file's code (here: code compiled
    after the baseline) is logged even when disabled again; torch's own enabling (make_fx) is
    not. The wrappers are put back at the end."""
    from torch.fx.experimental.proxy_tensor import make_fx

    from spec_lang.torch_frontend import op_guard

    was = op_guard._BASELINE[0]
    op_guard._BASELINE[0] = op_guard.Baseline()
    try:
        with dg.installed() as snap:
            dg.step_starts()
            make_fx(lambda x: x * 2)(torch.ones(2))           # torch's own: not logged
            assert snap.dispatcher_on == []
            ns: dict = {}
            exec(compile("import torch\ndef step():\n    g = torch._C._EnablePythonDispatcher()\n"
                         "    del g\n", "train.py", "exec"), ns)
            ns["step"]()
            found = dg.kernel_changes(snap)
        assert snap.dispatcher_on == ["train.py:3"], snap.dispatcher_on
        assert any(c.startswith("the Python dispatcher enabled by the train file at train.py:3")
                   for c in found), found
    finally:
        op_guard._BASELINE[0] = was


def test_a_higher_order_operator_made_by_the_train_file_is_logged():
    """R32d-1: a HigherOrderOperator made by the train file's code (here compiled after the
    baseline) is a change; one of torch's (made by torch's code) is not."""
    from torch._ops import _higher_order_ops

    from spec_lang.torch_frontend import op_guard

    was = op_guard._BASELINE[0]
    op_guard._BASELINE[0] = op_guard.Baseline()
    try:
        with dg.installed() as snap:
            ns: dict = {}
            exec(compile("from torch._ops import HigherOrderOperator\n"
                         "class Mine(HigherOrderOperator):\n"
                         "    def __init__(self):\n"
                         "        super().__init__('shardproof_test_hop')\n"
                         "    def __call__(self, *a):\n"
                         "        return super().__call__(*a)\n"
                         "op = Mine()\n", "train.py", "exec"), ns)
            found = dg.kernel_changes(snap)
        assert any(c.startswith("a HigherOrderOperator made by the train file: "
                                "shardproof_test_hop at train.py:4") for c in found), found
    finally:
        _higher_order_ops.pop("shardproof_test_hop", None)
        op_guard._BASELINE[0] = was
