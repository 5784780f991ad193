"""Adversarial round 63c (``tests/adversarial/ATTEMPTS.md``, "Round 63c"): f6b296aa (round 63a
fixed: every plain zero-argument getter of ``torch._C`` / ``_autograd`` / ``_functorch``,
autocast for ten device types, transform levels read and refused before the trace,
``torch.backends``' globals and the print options, numpy's error state by its fields)
attacked. Plans in ``plans/round63c/`` (template r63a_01: the parallel step doubles its
gradients from step 2 on a flag); the truth is
``python tests/adversarial/torch4_truth.py FILE 2``.

R63c-1: torch settings with a setter and no zero-argument getter in the three namespaces read:
TorchScript's profiling executor / profiling mode / fusion strategy (setters returning the old
value), the settings of ``torch._C``'s other submodules (``_lazy``'s symbolic shape mode and
force-fallback op, ``_distributed_c10d``'s debug level and in-flight-collective flag).
R63c-2: torch's thread-local dispatch key sets (read back by
``_dispatch_tls_is_dispatch_key_excluded(key)``, a getter taking the key) are not read: functorch's
``tls_set_vmap_excluded`` sets one (``_dispatch_tls_set_dispatch_key_excluded`` is refused, R49e-1).
R63c-3: ``torch.backends``' modules are read through the dicts bound when ``torch_c_state`` was
imported: a train file that imports ``torch.backends.mha`` again (dropped from ``sys.modules``)
toggles the fast path of a module whose dict nobody reads.
R63c-4: a ``torch.backends`` global whose value is not plain data is left out of "torch's Python
settings" (not unreadable): the fast path set to a list, the step appends to it.

The unit form runs a snippet in a child of its own between two ``_process_state``
fingerprints (``child_probe.patch_flags``).
"""

from __future__ import annotations

import functools
from pathlib import Path

import pytest

from tests.adversarial.child_probe import patch_flags

TREE = Path(__file__).resolve().parents[2]
ROUND = Path(__file__).resolve().parent / "plans" / "round63c"


def _toggle(get: str, set_: str) -> str:
    return f'''
_V0 = {get}
def _flag():
    v = {get}
    {set_}(not v)
    return v != _V0
'''


def _swap(set_: str, probe: str) -> str:
    """A setting with a setter only, that answers the old value: read by setting it."""
    return f'''
_V0 = {set_}({probe}); {set_}(_V0)
def _flag():
    v = {set_}({probe})
    {set_}(not v)
    return v != _V0
'''


# R63c-1: settings no fingerprint reads (none changes an eager CPU MLP)
_UNIT = {
    "jit_profiling_executor": _swap("torch._C._jit_set_profiling_executor", "True"),
    "jit_profiling_mode": _swap("torch._C._jit_set_profiling_mode", "True"),
    "jit_autocast_mode": _swap("torch._C._jit_set_autocast_mode", "True"),
    "saved_tensors_hooks_tracing": _swap("torch._C._autograd._saved_tensors_hooks_set_tracing",
                                         "True"),
    "jit_fusion_strategy": '''
_V0 = torch._C._jit_set_fusion_strategy([("STATIC", 2)]); torch._C._jit_set_fusion_strategy(_V0)
def _flag():
    v = torch._C._jit_set_fusion_strategy([("DYNAMIC", 3)])
    if v != _V0:
        torch._C._jit_set_fusion_strategy(_V0)
    return v != _V0
''',
    "lazy_symbolic_shape_mode": _toggle("torch._C._lazy._get_symbolic_shape_mode()",
                                        "torch._C._lazy._set_symbolic_shape_mode"),
    "lazy_force_fallback": '''
def _flag():
    v = torch._C._lazy._get_force_fallback()
    torch._C._lazy._set_force_fallback("" if v else "aten::zzz")
    return v != ""
''',
    "c10d_inflight_collective": '''
import torch.distributed
C = torch._C._distributed_c10d
_V0 = C._allow_inflight_collective_as_graph_input()
def _flag():
    v = C._allow_inflight_collective_as_graph_input()
    C._set_allow_inflight_collective_as_graph_input(not v)
    return v != _V0
''',
    "c10d_debug_level": '''
import torch.distributed
C = torch._C._distributed_c10d
_V0 = C.get_debug_level()
def _flag():
    v = C.get_debug_level()
    C.set_debug_level(C.DebugLevel.INFO if v == _V0 else _V0)
    return v != _V0
''',
}
# R63c-2: the thread-local dispatch key sets (torch._C._dispatch_tls_set_dispatch_key_excluded
# is refused from the train file, R49e-1; functorch's tls_set_vmap_excluded is not)
_UNIT["functorch_tls_vmap_excluded"] = '''
K = torch._C.DispatchKey.FuncTorchBatched
def _flag():
    v = torch._C._dispatch_tls_is_dispatch_key_excluded(K)
    torch._C._functorch.tls_set_vmap_excluded(not v)
    return v
'''
# R63c-3: torch.backends.mha imported again at import (a fresh module, its dict not the one
# torch_c_state bound), its fast path toggled by the step through the public setter
_UNIT["mha_module_reimported"] = '''
import importlib
import torch.backends
del sys.modules["torch.backends.mha"]
torch.backends.mha = importlib.import_module("torch.backends.mha")
_V0 = torch.backends.mha.get_fastpath_enabled()
def _flag():
    v = torch.backends.mha.get_fastpath_enabled()
    torch.backends.mha.set_fastpath_enabled(not v)
    return v != _V0
'''
# R63c-4: a torch.backends global that is not plain data is left out (not unreadable): the
# fast path set to a list at import (public setter), the step appends to it
_UNIT["mha_fastpath_list"] = '''
def _init():
    torch.backends.mha.set_fastpath_enabled([])
_init()
def _flag():
    v = torch.backends.mha.get_fastpath_enabled()
    n = len(v)
    v.append(1)
    return n > 0
'''
_FINDING = {k: "R63c-2" if k.startswith("functorch_tls") else
            "R63c-3" if k == "mha_module_reimported" else
            "R63c-4" if k == "mha_fastpath_list" else "R63c-1" for k in _UNIT}

# controls (seen): opt_einsum's flag set as an attribute (the PropModule's own dict gets it
# too) and the mha fast path toggled (f6b296aa's torch.backends reading)
_CONTROLS = {
    "opt_einsum_attribute": '''
import warnings
warnings.simplefilter("ignore")
torch.backends.opt_einsum.enabled = True
def _flag():
    v = torch.backends.opt_einsum.enabled
    torch.backends.opt_einsum.enabled = not v
    return not v
''',
    "mha_fastpath": _toggle("torch.backends.mha.get_fastpath_enabled()",
                            "torch.backends.mha.set_fastpath_enabled"),
}

# (the two mha forms each in a child of its own: the re-import would hide the list form's cause)
_SHARED = tuple(k for k in _UNIT if not k.startswith("mha_"))


@functools.lru_cache(maxsize=None)
def _shared() -> dict:
    return patch_flags("r63c", {n: _UNIT[n] for n in _SHARED})


@functools.lru_cache(maxsize=None)
def _unit(name: str) -> dict:
    if name in _SHARED:
        return _shared()[name]
    return patch_flags("r63c", {name: {**_UNIT, **_CONTROLS}[name]})[name]


@pytest.mark.slow   # (the flag's lever; its change is checked by the fast test)
@pytest.mark.state_modules()
@pytest.mark.parametrize("name", sorted(_UNIT) + sorted(_CONTROLS))
def test_r63c_unit_flag_tells_step_2_from_step_1(name):
    assert (_unit(name)["flag1"], _unit(name)["flag2"]) == (False, True), _unit(name)


@pytest.mark.state_modules()
@pytest.mark.parametrize("name", sorted(_UNIT) + sorted(_CONTROLS))
def test_r63c_unit_counter_is_a_change(name):
    """Each finding's unit form (fixed in stop 63) and the controls: a change is seen."""
    assert _unit(name)["changes"], (_FINDING.get(name), _unit(name))


def _prove(path: Path) -> int:
    from proofs.cli import prove_main  # noqa: PLC0415
    return prove_main(["--torch", str(path), "--jobs", "1", "--no-check"])


@pytest.mark.slow
@pytest.mark.parametrize("plan", [
    "r63c_01_jit_profiling_executor_wrong.py",
    "r63c_03_lazy_symbolic_shape_mode_wrong.py",
    "r63c_05_dispatch_tls_excluded_wrong.py",
    "r63c_06_mha_module_reimported_wrong.py",
    "r63c_08_mha_fastpath_list_wrong.py",
])
def test_r63c_wrong_plan_not_equivalent(plan):
    assert _prove(ROUND / plan) != 0


@pytest.mark.slow
@pytest.mark.parametrize("path", [
    ROUND / "r63c_04_transforms_in_step_right.py",
    TREE / "examples" / "torch" / "mlp_ddp.py",
    TREE / "examples" / "torch" / "gpt2_ddp.py",
])
def test_r63c_right_plans_equivalent(path):
    assert _prove(path) == 0
