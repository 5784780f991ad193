"""Round 50b: ``spec_lang/torch_frontend/dispatch_escapes.py`` at 73d4813 (a switch's call is
trusted when the deciding torch frame's code names the switch), attacked end to end
(``tests/adversarial/ATTEMPTS.md``, "Round 50b"). Plans in ``plans/round50b/``, based on r49e_05
(the DTensor grads' local tensors doubled in place in the parallel run only; truth wrong: w0
0.0073 / 0.0064 per step). Truth: ``tests/adversarial/torch4_truth.py FILE 2``.

R50b-1 (open): torch 2.13 helpers whose code names a switch and run the train file's code
under it -- ``torch.sparse._semi_structured_ops.no_dispatch`` (a context manager of its own
around ``torch._C._DisableTorchDispatch``), its ``fallback_dispatcher(func, ...)``, and
``torch._higher_order_ops.utils._maybe_fake_prop_ignore_unbacked(fn, args)`` (``fn`` under
``_disable_current_modes()``): the brief's named "finding if reachable" case.
"""

from __future__ import annotations

from pathlib import Path

import pytest

ROUND50B = Path(__file__).resolve().parent / "plans" / "round50b"

pytestmark = pytest.mark.slow


def _equivalent(out: dict) -> bool:
    return out["_rc"] == 0 and out.get("verdict") == "EQUIVALENT"


def _prove(name: str, tmp_path: Path) -> dict:
    from tests.adversarial.torch_prove import prove

    return prove(ROUND50B / name, tmp_path)


@pytest.mark.xfail(strict=True, reason="R50b-1 open: a torch helper whose code names the "
                   "switch runs the train file's code under it (trusted frame)")
@pytest.mark.parametrize("name", [
    "r50b_01_semi_structured_no_dispatch_grad_write_wrong.py",          # EQUIVALENT, 66 s
    "r50b_02_semi_structured_fallback_dispatcher_grad_write_wrong.py",  # EQUIVALENT, 47 s
    "r50b_05_hop_fake_prop_disable_modes_grad_write_wrong.py",          # EQUIVALENT, 48 s
])
def test_r50b_1_torch_helper_running_user_code_under_switch_is_not_accepted(name, tmp_path):
    """R50b-1, open: the switch is called by torch code that names it (trusted by
    ``_user_caller``), and that torch code then runs the train file's code (the body of its
    ``with``, or a callable it was handed) with the dispatch modes off: the doubled grads are
    not in the trace. EQUIVALENT (6 goals, 47-66 s); truth wrong (w0 0.0073 / 0.0064)."""
    out = _prove(name, tmp_path)
    assert not _equivalent(out), out


def test_r50b_export_unset_fake_helper_not_accepted(tmp_path):
    """Round 50b: ``torch.export.exported_program._disable_prexisiting_fake_mode(fn)`` runs
    ``fn`` under ``unset_fake_temporarily`` (trusted), but the proxy mode still records the
    write: NOT EQUIVALENT (39 s); truth wrong (w0 0.0073)."""
    out = _prove("r50b_03_export_disable_fake_mode_grad_write_wrong.py", tmp_path)
    assert not _equivalent(out), out


def test_r50b_python_key_fallthrough_refused(tmp_path):
    """Round 50b: a fallthrough kernel for ``aten::mul_.Scalar`` at the ``Python`` key
    (``torch.library.Library("aten", "IMPL")``) is refused at import by the dispatcher guard
    (exit 3, 13 s)."""
    out = _prove("r50b_04_library_python_fallthrough_grad_write_wrong.py", tmp_path)
    assert out["_rc"] == 3 and "torch.library IMPL library" in out["_err"], out


def test_r50b_selective_checkpoint_right_not_refused(tmp_path):
    """Round 50b control: selective activation checkpointing (torch's caching dispatch modes)
    around w1 under FSDP2, a right plan (truth 1.4e-17): EQUIVALENT (63 s)."""
    out = _prove("r50b_06_selective_checkpoint_right.py", tmp_path)
    assert _equivalent(out), out
