"""Adversarial round 65g (``tests/adversarial/ATTEMPTS.md``, "Round 65g"): stop 65's whole
product diff (``git diff f69493db..25e8b7f7 -- spec_lang``) attacked. Plans in
``plans/round65g/`` (template r65f_01 / r62d_01: the parallel step doubles its gradients from
step 2 on a flag, ``H["on"]`` set in ``parallelize``; right plans from
``examples/torch/mlp_ddp.py``); the truth is ``python tests/adversarial/torch4_truth.py FILE 2``.

R65g-1 (false accept): ``op_namespaces.namespace_data`` skips any entry of a ``torch.ops``
namespace whose value is exactly an ``OpOverloadPacket`` / ``OpOverload`` (``_cached``), under
whatever key and whichever operator it is: the step rebinds ``torch.ops.aten.__dict__
["r65g_flag"]`` from ``maximum`` to ``add`` and doubles its gradients when it finds ``add``
there (r65g_01 EQUIVALENT, the truth differing at step 2).

R65g-2 (refusal of a right plan, exit 3): ``registry_state._namespace_package`` iterates a
hand-made module's ``__spec__.submodule_search_locations`` (``list(locations)``) when its
loader is importlib's ``NamespaceLoader``: the user's ``__iter__`` runs inside the
fingerprint, and an exception it raises fails the capture (r65g_02: exit 3, "capturing the
training step failed: RuntimeError").
"""
from __future__ import annotations

from pathlib import Path

import pytest

from tests.adversarial.child_probe import run_child

TREE = Path(__file__).resolve().parents[2]
ROUND = Path(__file__).resolve().parent / "plans" / "round65g"

_REASONS = {
    "R65g-1": "R65g-1: op_namespaces._cached skips a torch.ops namespace entry by its type "
              "only (OpOverloadPacket / OpOverload), not by key and operator: a packet "
              "rebound under a key by the step is unseen: r65g_01 EQUIVALENT",
    "R65g-2": "R65g-2: registry_state._namespace_package runs list() on a hand-made spec's "
              "submodule_search_locations: the user's __iter__ runs in the fingerprint and "
              "its exception fails the capture: r65g_02 exit 3",
}

_UNIT = """
import json, sys, torch
from spec_lang.torch_frontend.process_state import _process_state
from spec_lang.torch_frontend.step_state import state_changes
SETUP
s0 = _process_state([], modules=["torch.ops", "torch.classes"])
CALL
s1 = _process_state([], modules=["torch.ops", "torch.classes"])
print(json.dumps(sorted(state_changes(s0, s1))))
"""


def _unit(setup: str, call: str) -> list:
    return run_child(_UNIT.replace("SETUP", setup).replace("CALL", call))


@pytest.mark.state_modules()
def test_r65g_unit_control_int_in_op_namespace_seen():
    # namespace_data reads a number a namespace holds by value
    assert _unit("torch.ops.aten.__dict__['r65g_n'] = 0",
                 "torch.ops.aten.__dict__['r65g_n'] = 1") != []


@pytest.mark.state_modules()
# (R65g-1: fixed, stop 65)
def test_r65g_unit_packet_rebound_in_op_namespace_seen():
    assert _unit("torch.ops.aten.__dict__['r65g_flag'] = torch.ops.aten.maximum",
                 "torch.ops.aten.__dict__['r65g_flag'] = torch.ops.aten.add") != []


@pytest.mark.state_modules()
# (R65g-1: fixed, stop 65)
def test_r65g_unit_overload_rebound_in_op_namespace_seen():
    assert _unit("torch.ops.aten.__dict__['r65g_flag'] = torch.ops.aten.maximum.default",
                 "torch.ops.aten.__dict__['r65g_flag'] = torch.ops.aten.add.Tensor") != []


_NS_SPEC = """
import json, sys, types, importlib.machinery as m
from spec_lang.torch_frontend.registry_state import registry_state
class Locations:
    def __iter__(self):
        raise RuntimeError("r65g: iterated")
mod = types.ModuleType("r65g_ns")
spec = m.ModuleSpec("r65g_ns", m.NamespaceLoader("r65g_ns", ["/tmp"], None), is_package=True)
spec.submodule_search_locations = Locations()
mod.__spec__ = spec
sys.modules["r65g_ns"] = mod
try:
    registry_state()
    print(json.dumps("read"))
except RuntimeError as e:
    print(json.dumps("raised: " + str(e)))
"""


@pytest.mark.state_modules()
# (R65g-2: fixed, stop 65)
def test_r65g_unit_namespace_spec_locations_not_iterated():
    assert run_child(_NS_SPEC) == "read"


def _prove(path: Path) -> int:
    from proofs.cli import prove_main  # noqa: PLC0415
    return prove_main(["--torch", str(path), "--jobs", "1", "--no-check"])


_WRONG = {
    "r65g_01_op_namespace_packet_rebound_wrong.py": None,     # (R65g-1: fixed, stop 65)
}
_RIGHT = {
    "r65g_02_namespace_spec_locations_raise_right.py": None,  # (R65g-2: fixed, stop 65)
}


@pytest.mark.slow
@pytest.mark.parametrize("plan", sorted(_WRONG))
def test_r65g_wrong_plan_not_equivalent(plan, request):
    if _WRONG[plan]:
        request.applymarker(pytest.mark.xfail(strict=True, reason=_REASONS[_WRONG[plan]]))
    assert _prove(ROUND / plan) != 0


@pytest.mark.slow
@pytest.mark.parametrize("plan", sorted(_RIGHT))
def test_r65g_right_plan_not_internal_error(plan, request):
    if _RIGHT[plan]:
        request.applymarker(pytest.mark.xfail(strict=True, reason=_REASONS[_RIGHT[plan]]))
    assert _prove(ROUND / plan) in (0, 2)


@pytest.mark.slow
@pytest.mark.parametrize("path", [
    TREE / "examples" / "torch" / "mlp_ddp.py",
    TREE / "examples" / "torch" / "gpt2_ddp.py",
])
def test_r65g_examples_equivalent(path):
    assert _prove(path) == 0
