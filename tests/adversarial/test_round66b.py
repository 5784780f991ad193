"""Adversarial round 66b (``tests/adversarial/ATTEMPTS.md``, "Round 66b"): eb4ff6c6 (round
66a's fixes: ``registry_state.import_origin`` (exact ``ModuleSpec``, built-in / frozen origin
only for a built-in / frozen name), ``op_namespaces._torch_packet`` (values checked against
``_facts``), ``NAMESPACE_FILLS`` + ``fills_dropped`` (the step may only add fills)) attacked.
Plans in ``plans/round66b/`` (template r66a_04 / r66a_01: the parallel step doubles its
gradients from step 2 on a flag); the truth is ``python tests/adversarial/torch4_truth.py
FILE 2``.

R66b-1 (false accept; R66a-3's fix one level down): a cached ``OpOverload`` a genuine packet
holds (``torch.ops.aten.abs.default``, looked up at import) deleted by the step from the
packet's ``__dict__`` and ``_dir``: the packet still passes ``_torch_packet`` (``_dir`` lists
exactly its cached overloads) and its ``NAMESPACE_FILLS`` line (path=type@id) is unchanged, so
the overload's absence is an unseen 1-bit state (r66b_01). Deleted and looked up again (a
fresh overload) is unseen too.
R66b-2 (false accept; R66a-1's fix bypassed): ``import_origin`` checks the built-in / frozen
origin against the SPEC's ``name``, which the step may rewrite, not the ``sys.modules`` key: a
copy of ``fnmatch.py`` loaded under a fresh name, its spec's origin set to ``"frozen"`` and
its name to ``"os"`` (``_imp.is_frozen("os")``), or ``"built-in"`` and ``"sys"``, is "made by
an import" and ``file_copies`` skips it (r66b_02).
R66b-3 (false accept; R66a-1's family): the copy's spec origin rewritten to an existing file no
module came from, another per copy (``/etc/passwd``, ``/etc/group``, ...; no file written):
``import_origin`` takes any existing origin at its word, ``file_copies`` sees no shared file
(r66b_05).
Right plans kept EQUIVALENT: ``torch.profiler.record_function`` in the step (r66b_03), operators
and a prim first looked up in the step (r66b_04), the examples.
"""
from __future__ import annotations

from pathlib import Path

import pytest

from tests.adversarial.child_probe import run_child

TREE = Path(__file__).resolve().parents[2]
ROUND = Path(__file__).resolve().parent / "plans" / "round66b"

_REASONS = {
    "R66b-1": "R66b-1: a cached OpOverload deleted by the step from a genuine torch.ops "
              "packet (its __dict__ and _dir) is no change: the packet's fill line is "
              "unchanged; r66b_01 EQUIVALENT",
    "R66b-2": "R66b-2: import_origin checks a frozen / built-in origin against the spec's "
              "own (rewritable) name: a copy of fnmatch.py with origin 'frozen' and spec name "
              "'os' is made by an import and no file copy; r66b_02 EQUIVALENT",
    "R66b-3": "R66b-3: a copy's spec origin rewritten to another existing file (one per copy) "
              "is made by an import and no file copy; r66b_05 EQUIVALENT",
}

_OVL = """
import json, sys
import torch
from spec_lang.torch_frontend.process_state import _process_state
from spec_lang.torch_frontend.step_state import state_changes
A = torch.ops.aten
P = A.abs
P.default
HOW = sys.argv[1]
s0 = _process_state([])
if HOW == "ctl_foreign":
    A.__dict__["r66b_x"] = 1
else:
    del P.__dict__["default"]
    P._dir.remove("default")
    if HOW == "refill":
        P.default
s1 = _process_state([])
print(json.dumps([c for c in sorted(state_changes(s0, s1))
                  if not c.startswith("the module __m")]))
"""


@pytest.mark.state_modules()
def test_r66b_unit_control_foreign_namespace_entry_seen():
    assert run_child(_OVL, "ctl_foreign") == \
        ["torch's op and class namespaces (torch.ops, torch.classes)"]


@pytest.mark.state_modules()
# (R66b-1: fixed, stop 66)
@pytest.mark.parametrize("how", ["drop", "refill"])
def test_r66b_unit_cached_overload_dropped_seen(how):
    assert run_child(_OVL, how) != []


_COPY = """
import json, sys, importlib.util, importlib._bootstrap
import torch
from spec_lang.torch_frontend.process_state import _process_state
from spec_lang.torch_frontend.step_state import state_changes
import fnmatch as HOST
def copy(k, how):
    m = importlib._bootstrap._load(
        importlib.util.spec_from_file_location(f"r66b_{how}{k}", HOST.__file__))
    if how == "frozen_os":
        m.__spec__.origin, m.__spec__.name = "frozen", "os"
    elif how == "builtin_sys":
        m.__spec__.origin, m.__spec__.name = "built-in", "sys"
    elif how == "other_file":
        m.__spec__.origin = ["/etc/passwd", "/etc/group"][k]
HOW = sys.argv[1]
copy(0, HOW)
s0 = _process_state([])
copy(1, HOW)
s1 = _process_state([])
print(json.dumps([c for c in sorted(state_changes(s0, s1))
                  if not c.startswith("the module __m")]))
"""


@pytest.mark.state_modules()
def test_r66b_unit_control_plain_copy_seen():
    assert run_child(_COPY, "plain") == \
        ["a module loaded from a file another loaded module came from: r66b_plain1"]


@pytest.mark.state_modules()
# (R66b-2: fixed, stop 66)
@pytest.mark.parametrize("how", ["frozen_os", "builtin_sys"])
def test_r66b_unit_copy_spec_named_frozen_or_builtin_seen(how):
    assert run_child(_COPY, how) != []


@pytest.mark.state_modules()
# (R66b-3: fixed, stop 66)
def test_r66b_unit_copy_origin_other_existing_file_seen():
    assert run_child(_COPY, "other_file") != []


def _prove(path: Path) -> int:
    from proofs.cli import prove_main  # noqa: PLC0415
    return prove_main(["--torch", str(path), "--jobs", "1", "--no-check"])


_WRONG = {     # (R66b-1..3: fixed, stop 66)
    "r66b_01_cached_overload_dropped_from_packet_wrong.py": None,
    "r66b_02_fnmatch_copy_spec_named_frozen_os_wrong.py": None,
    "r66b_05_fnmatch_copy_origin_other_existing_file_wrong.py": None,
}


@pytest.mark.slow
@pytest.mark.parametrize("plan", sorted(_WRONG))
def test_r66b_wrong_plan_not_equivalent(plan, request):
    if _WRONG[plan]:
        request.applymarker(pytest.mark.xfail(strict=True, reason=_REASONS[_WRONG[plan]]))
    assert _prove(ROUND / plan) != 0


@pytest.mark.slow
@pytest.mark.parametrize("plan", ["r66b_03_record_function_in_step_right.py",
                                  "r66b_04_ops_first_looked_up_in_step_right.py"])
def test_r66b_right_plan_equivalent(plan):
    assert _prove(ROUND / plan) == 0


@pytest.mark.slow
@pytest.mark.parametrize("example", ["mlp_ddp.py", "gpt2_ddp.py"])
def test_r66b_examples_equivalent(example):
    assert _prove(TREE / "examples" / "torch" / example) == 0
