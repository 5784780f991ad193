"""Adversarial round 63a (``tests/adversarial/ATTEMPTS.md``, "Round 63a"): f4f32b68 (round 62d
fixed: modes entered before the trace refused, numpy's print options and context values read as
plain data only, 62 torch settings) attacked. Plans in ``plans/round63a/`` (template r62d_06:
the parallel step doubles its gradients from step 2 on a flag); the truth is
``python tests/adversarial/torch4_truth.py FILE 2``.

R63a-1: R62a-3 / R62d-3's family again: zero-argument torch C getters still not in
``SETTINGS_READERS`` (TorchScript's, functorch's, the xla / other devices' autocast, ...).
R63a-2 (false refusal): ``np.seterr`` (or ``np.setbufsize`` / ``np.seterrcall``) at import puts
numpy's error-state context variable (a PyCapsule) into the current context, so "the context
variables" is unreadable and a right plan is UNKNOWN. R63a-3: torch's functorch dynamic layer
stack (a vmap level left entered between steps) is not read.

The unit form runs a snippet in a child of its own between two ``_process_state``
fingerprints (``child_probe.patch_flags``).
"""

from __future__ import annotations

import functools
from pathlib import Path

import pytest

from tests.adversarial.child_probe import patch_flags

TREE = Path(__file__).resolve().parents[2]
ROUND = Path(__file__).resolve().parent / "plans" / "round63a"

# R63a-1: (getter, setter) of settings no fingerprint reads; none changes an eager CPU MLP
_SETTINGS = {
    "vmap_fallback_warnings": ("torch._C._debug_only_are_vmap_fallback_warnings_enabled()",
                               "torch._C._debug_only_display_vmap_fallback_warnings"),
    "jit_inline_everything": ("torch._C._jit_get_inline_everything_mode()",
                              "torch._C._jit_set_inline_everything_mode"),
    "jit_tracer_state_warn": ("torch._C._jit_get_tracer_state_warn()",
                              "torch._C._jit_set_tracer_state_warn"),
    "jit_te_must_use_llvm_cpu": ("torch._C._jit_get_te_must_use_llvm_cpu()",
                                 "torch._C._jit_set_te_must_use_llvm_cpu"),
    "jit_texpr_reductions": ("torch._C._jit_texpr_reductions_enabled()",
                             "torch._C._jit_set_texpr_reductions_enabled"),
    "jit_symbolic_shapes_test": ("torch._C._jit_symbolic_shapes_test_mode_enabled()",
                                 "torch._C._jit_set_symbolic_shapes_test_mode"),
    "functorch_vmap_fallback": ("torch._C._functorch._is_vmap_fallback_enabled()",
                                "torch._C._functorch._set_vmap_fallback_enabled"),
    "functorch_inplace_requires_grad": (
        "torch._C._functorch.get_inplace_requires_grad_allowed()",
        "torch._C._functorch.set_inplace_requires_grad_allowed"),
    "functorch_single_level_autograd_fn": (
        "torch._C._functorch.get_single_level_autograd_function_allowed()",
        "torch._C._functorch.set_single_level_autograd_function_allowed"),
    "xla_autocast": ("torch.is_autocast_enabled('xla')",
                     "(lambda b: torch.set_autocast_enabled('xla', b))"),
}
_UNIT = {k: f'''
import warnings
warnings.simplefilter("ignore")
_V0 = {g}
def _flag():
    v = {g}
    {s}(not v)
    return v != _V0
''' for k, (g, s) in _SETTINGS.items()}
_UNIT["jit_num_profiled_runs"] = '''
_V0 = torch._C._jit_get_num_profiled_runs()
def _flag():
    v = torch._C._jit_get_num_profiled_runs()
    torch._C._jit_set_num_profiled_runs(v + 1)
    return v != _V0
'''
_UNIT["functorch_vmap_level_left"] = '''
from torch._C import _functorch as F
def _flag():
    d = F.get_dynamic_layer_stack_depth()
    if d == 0:
        F._vmap_increment_nesting(1, "error")
    else:
        F._vmap_decrement_nesting()
    return d > 0
'''
_UNIT["functorch_grad_level_left"] = '''
from torch._C import _functorch as F
def _flag():
    d = F.get_dynamic_layer_stack_depth()
    if d == 0:
        F._grad_increment_nesting()
    else:
        F._grad_decrement_nesting()
    return d > 0
'''
_FINDING = {**{k: "R63a-1" for k in _SETTINGS}, "jit_num_profiled_runs": "R63a-1",
            "functorch_vmap_level_left": "R63a-3", "functorch_grad_level_left": "R63a-3"}

# controls (seen): numpy's buffer size and error callback toggled by the step (the error-state
# context variable enters the context: unreadable); an infra dispatch mode set by the step
_CONTROLS = {
    "np_bufsize": '''
import numpy as np
_V0 = np.getbufsize()
def _flag():
    v = np.getbufsize()
    np.setbufsize(v * 2)
    return v != _V0
''',
    "np_errcall_swap": '''
import numpy as np
def _a(*a): pass
def _b(*a): pass
def _flag():
    v = np.geterrcall()
    np.seterrcall(_b if v is _a else _a)
    return v is _a
''',
    "infra_dispatch_mode": '''
from torch.utils._python_dispatch import TorchDispatchMode
class M(TorchDispatchMode):
    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        return func(*args, **(kwargs or {}))
def _flag():
    m = torch._C._get_dispatch_mode(torch._C._TorchDispatchModeKey.FUNCTIONAL)
    if m is None:
        m = M()
        m._mode_key = torch._C._TorchDispatchModeKey.FUNCTIONAL
        torch._C._set_dispatch_mode(m)
        return False
    return True
''',
}

# R63a-2's unit form: np.seterr at import, a step that changes nothing
_RIGHT = {"np_seterr_at_import": '''
import numpy as np
np.seterr(all="ignore")
def _flag():
    return False
''', "np_errstate_in_step": '''
import numpy as np
def _flag():
    with np.errstate(all="ignore"):
        pass
    return False
'''}

# the settings' toggles share one child (each a setting of its own, as round 62d's); the
# others get one each (what they leave set would show in the others)
_SHARED = tuple(_SETTINGS) + ("jit_num_profiled_runs",)


@functools.lru_cache(maxsize=None)
def _shared() -> dict:
    return patch_flags("r63a", {n: _UNIT[n] for n in _SHARED})


@functools.lru_cache(maxsize=None)
def _unit(name: str) -> dict:
    if name in _SHARED:
        return _shared()[name]
    src = {**_UNIT, **_CONTROLS, **_RIGHT}[name]
    return patch_flags("r63a", {name: src})[name]


@pytest.mark.slow   # (the flag's lever; its change is checked by the fast test)
@pytest.mark.state_modules()
@pytest.mark.parametrize("name", sorted(_UNIT) + sorted(_CONTROLS))
def test_r63a_unit_flag_tells_step_2_from_step_1(name):
    assert (_unit(name)["flag1"], _unit(name)["flag2"]) == (False, True), _unit(name)


@pytest.mark.state_modules()
@pytest.mark.parametrize("name", sorted(_UNIT) + sorted(_CONTROLS))
def test_r63a_unit_counter_is_a_change(name):
    assert _unit(name)["changes"], (_FINDING.get(name), _unit(name))


@pytest.mark.state_modules()
@pytest.mark.parametrize("name", ["np_seterr_at_import", "np_errstate_in_step"])
def test_r63a_right_unit_no_change(name):
    assert _unit(name)["changes"] == [], _unit(name)


def _prove(path: Path) -> int:
    from proofs.cli import prove_main  # noqa: PLC0415
    return prove_main(["--torch", str(path), "--jobs", "1", "--no-check"])


@pytest.mark.slow
@pytest.mark.parametrize("plan", [
    "r63a_01_jit_inline_everything_wrong.py", "r63a_02_xla_autocast_wrong.py",
    "r63a_06_functorch_vmap_level_left_wrong.py",
    # R11-1 / R11-6's public-API forms, read since (torch_c_state.torch_python_settings)
    "r63a_04_mha_fastpath_wrong.py", "r63a_05_torch_printoptions_wrong.py"])
def test_r63a_wrong_plan_not_equivalent(plan):
    assert _prove(ROUND / plan) != 0


@pytest.mark.slow
@pytest.mark.parametrize("path", [
    ROUND / "r63a_03_numpy_seterr_import_right.py",
    TREE / "examples" / "torch" / "mlp_ddp.py",
    TREE / "examples" / "torch" / "gpt2_ddp.py",
])
def test_r63a_right_plans_equivalent(path):
    assert _prove(path) == 0
