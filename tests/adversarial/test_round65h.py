"""Adversarial round 65h (``tests/adversarial/ATTEMPTS.md``, "Round 65h"): 339ccd56
(``git diff 72c55465..339ccd56 -- spec_lang``: ``special_values._NP_KNOWN`` / ``_ufunc_name``,
``op_namespaces._cached(where, k, v)``, ``registry_state._namespace_package``) attacked. Plans
in ``plans/round65h/`` (template r65g_01 / r62d_01: the parallel step doubles its gradients
from step 2 on a flag, ``H["on"]`` set in ``parallelize``); the truth is ``python
tests/adversarial/torch4_truth.py FILE 2``.

R65h-1 (false accept): ``op_namespaces._cached`` skips an exact ``OpOverloadPacket`` whose own
``__dict__`` says ``_qualified_op_name`` is ``<namespace>::<key>``; that name is the packet's
own data, so a packet built by hand (``OpOverloadPacket.__new__``, another packet's ``__dict__``
copied, the name set) passes whatever operator it runs. The step rebinds
``torch.ops.aten.__dict__["r65h_flag"]`` from one forged packet to another (r65h_01), or
replaces ``torch.ops.aten.mul`` with a forged ``aten::mul`` packet running ``add`` (r65h_02):
both EQUIVALENT, the truth differing at step 2.

R65h-2 (false accept): the higher-order branch of ``_cached`` skips an entry when
``torch._ops._higher_order_ops`` holds it under that key; that registry is a dict of torch's
read by type, so the step registers torch's own ``cond`` under a new key there and in
``torch.ops.higher_order`` (r65h_04 EQUIVALENT; a HigherOrderOperator the train file makes is
refused by the kernel guard, r65h_03 exit 3).
"""
from __future__ import annotations

from pathlib import Path

import pytest

from tests.adversarial.child_probe import run_child

TREE = Path(__file__).resolve().parents[2]
ROUND = Path(__file__).resolve().parent / "plans" / "round65h"

_REASONS = {
    "R65h-1": "R65h-1: op_namespaces._cached trusts a packet's own _qualified_op_name: a "
              "packet forged by hand (OpOverloadPacket.__new__, name '<ns>::<key>') bound or "
              "rebound under that key is skipped whatever it runs: r65h_01 / r65h_02 "
              "EQUIVALENT",
    "R65h-2": "R65h-2: op_namespaces._cached skips a HigherOrderOperator the registry "
              "torch._ops._higher_order_ops holds under the key; the step registers torch's "
              "cond under a new key there and in torch.ops.higher_order: r65h_04 EQUIVALENT",
}

_UNIT = """
import json, sys, torch
import torch._higher_order_ops
from spec_lang.torch_frontend.process_state import _process_state
from spec_lang.torch_frontend.step_state import state_changes
OPP = torch._ops.OpOverloadPacket
def forge(p, q):
    f = OPP.__new__(OPP)
    d = object.__getattribute__(f, "__dict__")
    d.update(object.__getattribute__(p, "__dict__"))
    d["_qualified_op_name"] = q
    return f
SETUP
s0 = _process_state([], modules=["torch.ops", "torch.classes"])
CALL
s1 = _process_state([], modules=["torch.ops", "torch.classes"])
print(json.dumps(sorted(state_changes(s0, s1))))
"""


def _unit(setup: str, call: str) -> list:
    return run_child(_UNIT.replace("SETUP", setup).replace("CALL", call))


@pytest.mark.state_modules()
def test_r65h_unit_control_packet_under_other_key_seen():
    # R65g-1's fix: a real packet bound under a key not its own name is read
    assert _unit("torch.ops.aten.__dict__['r65h_flag'] = torch.ops.aten.maximum",
                 "torch.ops.aten.__dict__['r65h_flag'] = torch.ops.aten.add") != []


@pytest.mark.state_modules()
def test_r65h_unit_forged_packet_rebound_seen():
    assert _unit("torch.ops.aten.__dict__['r65h_flag'] = forge(torch.ops.aten.maximum, "
                 "'aten::r65h_flag')",
                 "torch.ops.aten.__dict__['r65h_flag'] = forge(torch.ops.aten.add, "
                 "'aten::r65h_flag')") != []


@pytest.mark.state_modules()
def test_r65h_unit_forged_packet_replacing_torch_key_seen():
    assert _unit("torch.ops.aten.mul",
                 "torch.ops.aten.__dict__['mul'] = forge(torch.ops.aten.add, 'aten::mul')") != []


@pytest.mark.state_modules()
def test_r65h_unit_torch_hoo_registered_under_new_key_seen():
    assert _unit("C = torch.ops.higher_order.cond",
                 "torch._ops._higher_order_ops['r65h_flag'] = C\n"
                 "torch.ops.higher_order.__dict__['r65h_flag'] = C") != []


def _prove(path: Path) -> int:
    from proofs.cli import prove_main  # noqa: PLC0415
    return prove_main(["--torch", str(path), "--jobs", "1", "--no-check"])


_WRONG = {
    "r65h_01_forged_packet_own_key_wrong.py": None,        # (R65h-1: fixed)
    "r65h_02_forged_packet_torch_key_wrong.py": None,      # (R65h-1: fixed)
    "r65h_03_higher_order_op_rebound_wrong.py": None,       # (refused, exit 3: held)
    "r65h_04_torch_hoo_registered_new_key_wrong.py": None,  # (R65h-2: fixed)
}


@pytest.mark.slow
@pytest.mark.parametrize("plan", sorted(_WRONG))
def test_r65h_wrong_plan_not_equivalent(plan, request):
    if _WRONG[plan]:
        request.applymarker(pytest.mark.xfail(strict=True, reason=_REASONS[_WRONG[plan]]))
    assert _prove(ROUND / plan) != 0


@pytest.mark.slow
@pytest.mark.parametrize("example", ["mlp_ddp.py", "gpt2_ddp.py"])
def test_r65h_examples_stay_equivalent(example):
    assert _prove(TREE / "examples" / "torch" / example) == 0
