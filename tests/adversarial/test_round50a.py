"""Round 50a: ``spec_lang/torch_frontend/dispatch_escapes.py`` (989eab9: torch's dispatch
switches wrapped at every loaded binding, a call refused when its caller, past standard-library
frames, is not torch's or the front end's), attacked end to end (``tests/adversarial/ATTEMPTS.md``,
"Round 50a"). Plans in ``plans/round50a/``, all based on r49e_05 (the DTensor grads' local
tensors doubled in place in the parallel run only; truth wrong: w0 0.0073 / 0.0064 per step).
Truth: ``tests/adversarial/torch4_truth.py FILE 2`` (dp 2, gloo, float64).

Since the lead's fix (stop 50) only R50a-1's ``_disabled_torch_dispatch_impl`` stays open (a
stated limit); the rest is refused. At 989eab9: R50a-1: a switch not in ``ESCAPES``
(``torch._C._disabled_torch_dispatch_impl``, bound also as
``torch.Tensor.__torch_dispatch__``; ``torch.utils._python_dispatch._unset_infra_mode``; a dispatch
mode's own ``__exit__``). R50a-2: the wrapper keeps the original (``__wrapped__``). R50a-3: the
caller test believes a torch frame that is not the one deciding: code compiled with torch's
filename, torch helpers that call the wrapper for the train file (``tree_map``, the
``torch.no_grad()`` decorator).
"""

from __future__ import annotations

from pathlib import Path

import pytest

ROUND50A = Path(__file__).resolve().parent / "plans" / "round50a"

pytestmark = pytest.mark.slow


def _equivalent(out: dict) -> bool:
    return out["_rc"] == 0 and out.get("verdict") == "EQUIVALENT"


def _prove(name: str, tmp_path: Path) -> dict:
    from tests.adversarial.torch_prove import prove

    return prove(ROUND50A / name, tmp_path)


@pytest.mark.xfail(strict=True, reason="R50a-1 open (a stated limit, the R29-4 family): "
                   "torch._C._disabled_torch_dispatch_impl cannot be wrapped")
@pytest.mark.parametrize("name", [
    "r50a_01_disabled_torch_dispatch_impl_grad_write_wrong.py",   # EQUIVALENT, 61 s / 18 s
    "r50a_02_tensor_torch_dispatch_grad_write_wrong.py",          # EQUIVALENT, 47 s / 18 s
])
def test_r50a_1_disabled_torch_dispatch_impl_is_not_accepted(name, tmp_path):
    """R50a-1, open: ``torch._C._disabled_torch_dispatch_impl`` (bound also as
    ``torch.Tensor.__torch_dispatch__``) runs the kernel with the Python key and every key
    before it excluded. torch compares it by identity (``check_has_torch_dispatch`` in C++,
    ``_ops.py``), so it cannot be replaced by a wrapper: EQUIVALENT (6 goals, at 989eab9 and
    after the fix of the rest of round 50a); truth wrong (w0 0.0073)."""
    out = _prove(name, tmp_path)
    assert not _equivalent(out), out


@pytest.mark.parametrize("name, switch, line", [
    ("r50a_03_wrapped_original_grad_write_wrong.py", "torch._C._DisableTorchDispatch", 61),
    ("r50a_04_compile_torch_filename_grad_write_wrong.py", "torch._C._DisableTorchDispatch", 61),
    ("r50a_05_tree_map_guard_grad_write_wrong.py", "torch._C._ExcludeDispatchKeyGuard", 61),
    ("r50a_06_no_grad_decorator_trampoline_grad_write_wrong.py",
     "torch._C._DisableTorchDispatch", 61),
    ("r50a_07_unset_infra_proxy_mode_grad_write_wrong.py",
     "torch.utils._python_dispatch._unset_infra_mode", 62),
    ("r50a_08_proxy_mode_exit_enter_grad_write_wrong.py",
     "torch.fx.experimental.proxy_tensor.ProxyTorchDispatchMode.__exit__", 63),
])
def test_r50a_switch_reached_another_way_is_refused(name, switch, line, tmp_path):
    """R50a-1 (07, 08: switches now listed), R50a-2 (03: the wrapper keeps no
    ``__wrapped__``), R50a-3 (04: whose code a frame runs is decided by the code object, not
    its file name; 05 / 06: a torch helper calling the switch it was handed is looked through):
    EQUIVALENT at 989eab9 (41-65 s); since the fix exit 3 at the user's line (7 s)."""
    out = _prove(name, tmp_path)
    assert out["_rc"] == 3 and f":{line}: the train file calls {switch}," in out["_err"], out


@pytest.mark.parametrize("name", [
    "r50a_09_user_dispatch_mode_right.py",
    "r50a_10_checkpoint_right.py",
])
def test_r50a_right_plans_not_refused(name, tmp_path):
    """Round 50a controls: right plans (truth 0) through torch's own switch users (a
    pass-through user ``TorchDispatchMode``; non-reentrant ``torch.utils.checkpoint`` under
    FSDP2) are not refused by the wrapper."""
    out = _prove(name, tmp_path)
    assert _equivalent(out), out
