"""Adversarial round 32 (``tests/adversarial/ATTEMPTS.md``, "Round 32"), against wip/adv32 at
ddc6b7a (= main: ``spec_lang/torch_frontend/dispatcher_guard.py``, R31-2's fix: a snapshot of
``torch._C._dispatch_dump`` for every op and of the Python kernels of every ``OperatorBase``,
compared after the import, after the step, and for the c10d ops around every guarded
collective). Plans in ``plans/round32/``. Truth: ``tests/adversarial/torch4_truth.py FILE 2``;
gloo, float64.

* R32-1 (false accept; ``r32_01`` dp 2, ``r32_09`` FSDP2 dp 2): ``dispatcher_guard._LINE`` does
  not match the dump's ``KEY[alias]: registered at ...`` lines, so no alias-key registration is
  in the snapshot. A kernel registered by the train file on ``CompositeExplicitAutograd`` of an
  op that has no CPU kernel (``aten::_foreach_div_.Scalar``; ``aten::split.Tensor``, which
  gloo's reduce-scatter calls inside its C++ work) is what the real CPU run calls, never the
  capture (Meta kernel / fake process group). Truth 0.0070 / 0.0093; FSDP2 0.41 / 0.32.
* R32-2 (false accept; ``r32_03``, ``r32_08``): the guard looks up ``torch._C._dispatch_dump`` and
  ``gc.get_objects`` at every check; the train file replaces them (a recorded dump; a list
  without the one ``OpOverload``) and registers r31_10's ``aten::div_`` kernel. Truth 0.0070.
* R32-3 (false accept; ``r32_04``, ``r32_07``): the Python dispatcher kept enabled by the train
  file runs ``py_kernels`` / ``_dispatch_cache`` in the real CPU run; a py_kernel that is a
  function older than the train file (``typing.assert_type``) is exempt (``_own_kernel``), and
  ``_dispatch_cache`` is not compared. Truth 0.0070.
* R32-4 (false accept, the gap docs/torch.md lists; ``r32_06``): the kernel registered and
  removed inside the step, after the last collective. Truth 0.0070.
* R32-5 (false refusal; ``r32_05``): the first ``torch.vmap`` of a process registers torch's own
  FuncTorchBatched kernels (``torch/_functorch/predispatch.py``): a right plan whose loss uses
  vmap is refused (exit 3); EQUIVALENT at 853d73d.

All five fixed in stop 32 (``dispatcher_guard``): every line of each op's dump compared, alias
keys included (R32-1); the dispatcher functions and ``gc.get_objects`` bound when the guard is
imported (R32-2); a Python kernel must be a torch module's function (or a dispatch key), the
``_dispatch_cache`` compared, and the Python dispatcher left enabled by the train file refused
(R32-3); every ``torch.library`` library made after the snapshot logged, destroyed or not
(R32-4); torch's lazy vmap kernels loaded before the snapshot (R32-5).
"""

from __future__ import annotations

from pathlib import Path

import pytest

ROUND32 = Path(__file__).resolve().parent / "plans" / "round32"


def _not_accepted(out: dict) -> bool:
    """Anything but EQUIVALENT: NOT EQUIVALENT, UNKNOWN or a refusal (exit 3)."""
    return out["_rc"] != 0 and out.get("verdict") != "EQUIVALENT"


def _equivalent(out: dict) -> bool:
    return out["_rc"] == 0 and out.get("verdict") == "EQUIVALENT"


def _prove(name: str, tmp_path: Path) -> dict:
    from tests.adversarial.torch_prove import prove

    return prove(ROUND32 / name, tmp_path)


# -- fast: the guard's mechanism, in-process ---------------------------------------------------

def _lib(ns: str, kind: str):
    import warnings

    import torch

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return torch.library.Library(ns, kind)


def test_r32_1_alias_key_kernel_is_a_change():
    """A ``CompositeExplicitAutograd`` kernel of ``aten::_foreach_div_.Scalar`` (no CPU kernel:
    the CPU run calls it) is not among ``kernel_changes()``; removed again at the end."""
    import warnings

    import torch

    from spec_lang.torch_frontend import dispatcher_guard as dg

    snap = dg.DispatcherSnapshot()
    lib = _lib("aten", "IMPL")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            lib.impl("_foreach_div_.Scalar", lambda self, scalar: None,
                     "CompositeExplicitAutograd")
        t = torch.ones(2)
        torch._foreach_div_([t], 2.0)
        assert t.tolist() == [1.0, 1.0]          # the CPU run called the kernel
        changes = dg.kernel_changes(snap)
    finally:
        lib._destroy()
    assert any("_foreach_div_" in c for c in changes), changes


def test_r32_2_replaced_dispatch_dump_does_not_hide_a_kernel():
    """r32_03's mechanism: a recorded dump put on ``torch._C`` hides a CPU kernel of
    ``aten::sinc``; both put back at the end."""
    import warnings

    import torch

    from spec_lang.torch_frontend import dispatcher_guard as dg

    snap = dg.DispatcherSnapshot()
    dump = torch._C._dispatch_dump
    text = {"aten::sinc": dump("aten::sinc")}
    lib = _lib("aten", "IMPL")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            lib.impl("sinc", lambda x: x, "CPU")
        torch._C._dispatch_dump = lambda name: text[name] if name in text else dump(name)
        changes = dg.kernel_changes(snap)
    finally:
        torch._C._dispatch_dump = dump
        lib._destroy()
    assert any("aten::sinc" in c for c in changes), changes


@pytest.mark.parametrize("how", ["dispatch_cache", "stdlib_py_kernel"])
def test_r32_3_python_dispatcher_kernel_is_a_change(how):
    """r32_07's / r32_04's mechanism on ``aten::sinc.default`` (the CPU entry the Python
    dispatcher would run); removed again at the end."""
    import typing

    import torch

    from spec_lang.torch_frontend import dispatcher_guard as dg

    op = torch.ops.aten.sinc.default
    cpu = torch._C.DispatchKey.CPU
    snap = dg.DispatcherSnapshot()
    try:
        if how == "dispatch_cache":
            op._dispatch_cache[cpu] = lambda x: x
        else:
            op.py_impl(cpu)(typing.assert_type)
        changes = dg.kernel_changes(snap)
    finally:
        op.py_kernels.pop(cpu, None)
        op._dispatch_cache.clear()
    assert any("sinc" in c for c in changes), changes


# -- findings (fixed in stop 32: the right outcome asserted) ------------------------------------

@pytest.mark.slow
def test_r32_1_dp_foreach_div_alias_kernel_is_not_accepted(tmp_path):
    """EQUIVALENT at ddc6b7a (4 goals, 50 s); truth update 0.0070 / 0.0093."""
    out = _prove("r32_01_dp_foreach_div_cea_alias.py", tmp_path)
    assert _not_accepted(out), out


@pytest.mark.slow
def test_r32_1_fsdp_split_alias_kernel_in_gloo_is_not_accepted(tmp_path):
    """EQUIVALENT at ddc6b7a (4 goals, 88 s); truth update 0.41 / 0.32."""
    out = _prove("r32_09_fsdp_split_cea_alias_in_gloo_reduce_scatter.py", tmp_path)
    assert _not_accepted(out), out


@pytest.mark.slow
def test_r32_2_dp_dispatch_dump_replaced_is_not_accepted(tmp_path):
    """EQUIVALENT at ddc6b7a (4 goals, 71 s); truth update 0.0070 / 0.0093."""
    out = _prove("r32_03_dp_dispatch_dump_replaced.py", tmp_path)
    assert _not_accepted(out), out


@pytest.mark.slow
def test_r32_2_dp_gc_get_objects_hides_py_kernel_is_not_accepted(tmp_path):
    """EQUIVALENT at ddc6b7a (4 goals, 72 s); truth update 0.0070 / 0.0093."""
    out = _prove("r32_08_dp_gc_get_objects_hides_py_kernel.py", tmp_path)
    assert _not_accepted(out), out


@pytest.mark.slow
def test_r32_3_dp_py_kernel_stdlib_function_is_not_accepted(tmp_path):
    """EQUIVALENT at ddc6b7a (4 goals, 33 s); truth update 0.0070 / 0.0093."""
    out = _prove("r32_04_dp_py_kernel_stdlib_function.py", tmp_path)
    assert _not_accepted(out), out


@pytest.mark.slow
def test_r32_3_dp_python_dispatch_cache_is_not_accepted(tmp_path):
    """EQUIVALENT at ddc6b7a (4 goals, 57 s); truth update 0.0070 / 0.0093."""
    out = _prove("r32_07_dp_python_dispatch_cache.py", tmp_path)
    assert _not_accepted(out), out


@pytest.mark.slow
def test_r32_4_dp_kernel_registered_inside_step_is_not_accepted(tmp_path):
    """EQUIVALENT at ddc6b7a (4 goals, 21 s); truth update 0.0070 / 0.0093."""
    out = _prove("r32_06_dp_kernel_registered_inside_step.py", tmp_path)
    assert _not_accepted(out), out


# -- false refusal (fixed in stop 32) -----------------------------------------------------------

@pytest.mark.slow
def test_r32_5_dp_vmap_loss_right_is_accepted(tmp_path):
    """Refused at ddc6b7a (exit 3, 27 s); EQUIVALENT at 853d73d (31 s); right (truth 2.8e-17)."""
    out = _prove("r32_05_dp_vmap_loss_right.py", tmp_path)
    assert _equivalent(out), out


# -- control -----------------------------------------------------------------------------------

@pytest.mark.slow
def test_r32_control_dp_foreach_div_is_accepted(tmp_path):
    """r32_01 without the kernel: right (truth 2.8e-17); EQUIVALENT at ddc6b7a (91 s)."""
    out = _prove("r32_02_dp_foreach_div_control.py", tmp_path)
    assert _equivalent(out), out
