"""The user's line of a state UNKNOWN (issue 12 item 2: every UNKNOWN names file:line).

Each case is an adversarial train file whose parallel step leaves Python state the spec's does
not (rounds 7-9); the message is the one :func:`leftover.scalar_state_differences` writes for
the entry step_state records, and the site must be the line of the file that changes it."""

from __future__ import annotations

from pathlib import Path

import pytest

from spec_lang.torch_frontend.leftover import CHANGED, scalar_state_differences
from spec_lang.torch_frontend.state_sites import declaration_site, state_site

PLANS = Path(__file__).parents[1] / "adversarial" / "plans"


def _line_of(path: Path, snippet: str) -> int:
    lines = path.read_text().splitlines()
    hits = [i + 1 for i, s in enumerate(lines) if s.strip().startswith(snippet)]
    assert len(hits) == 1, (path, snippet, hits)
    return hits[0]


CASES = [  # (file, step_state entry, the line that changes it)
    ("torch9/r9_01_random_instance_state.py",
     "the global _RNG of r9_01_random_instance_state.py", "_RNG.random()"),
    ("torch7/r7_01_private_attribute_left.py", "module <model>._scale", "model._scale = 0.5"),
    ("torch7/r7_02_attribute_added_one_side.py", "module <model>.scale", "model.scale = 0.5"),
    ("torch8/r8_01_deque_scale.py", "the global _SCALE of r8_01_deque_scale.py",
     "_SCALE[0] = 0.5"),
    ("torch8/r8_03_environ_scale.py", "the environment (os.environ)", 'os.environ["MLP_SCALE"]'),
    ("torch8/r8_04_functional_patched.py", "torch namespace torch.nn.functional",
     "nn.functional.silu = "),
    ("torch9/r9_03_local_class_attribute.py", "module <model> class MLP",
     "type(model).scale = 0.5"),
    ("torch10/r10_01_stdlib_module_attribute.py", "the module math", "math.r10_scale = 0.5"),
]


@pytest.mark.parametrize(("name", "entry", "snippet"), CASES)
def test_a_changed_entry_is_located_at_the_line_that_writes_it(name, entry, snippet):
    path = PLANS / name
    spec = {}
    plan = {CHANGED + entry: "builtins.float:0.5"}
    (why,) = scalar_state_differences(spec, plan)
    site = state_site(str(path), path.read_text(), why)
    assert site == f"written at {path.name}:{_line_of(path, snippet)}"


def test_a_setting_with_two_values_is_located_at_its_item_assignment():
    path = PLANS / "torch7/r7_05_lr_numpy_float32.py"
    (why,) = scalar_state_differences({"param_groups[0].lr": "0.1"},
                                      {"param_groups[0].lr": "<type numpy.float32>"})[:1]
    line = _line_of(path, 'optimizer.param_groups[0]["lr"]')
    assert state_site(str(path), path.read_text(), why) == f"written at {path.name}:{line}"


def test_nothing_found_falls_back_to_the_train_step_line_and_never_raises(tmp_path):
    src = "import torch\nMESH = {'dp': 2}\n\n\ndef train_step(model, opt, batch, mesh):\n" \
          "    return model(batch)\n"
    f = tmp_path / "t.py"
    f.write_text(src)
    assert state_site(str(f), src, "torch CPU generator leaves the step as a in the parallel "
                      "step, b in the single-device step") == "changed during train_step (t.py:5)"
    assert state_site(str(f), "def broken(:\n", "anything") == "changed during train_step (t.py:1)"
    imported = "from common import train_step\nMESH = {'dp': 2}\n"
    assert state_site(str(f), imported, "the global X of t.py (to 1) and the other does not") \
        == "changed during train_step (t.py:1)"
    assert declaration_site(str(f), src, "MESH") == "t.py:2"


def test_a_global_of_a_neighbour_module_is_located_in_that_file(tmp_path):
    (tmp_path / "helper.py").write_text("CACHE = []\n\n\ndef remember(x):\n    CACHE.append(x)\n")
    src = "from helper import remember\n\n\ndef train_step(model, opt, batch, mesh):\n" \
          "    remember(1)\n"
    (tmp_path / "t.py").write_text(src)
    why = "the parallel step changes the global CACHE of helper.py (to list:[1]) and the other " \
          "does not: the next step would differ"
    assert state_site(str(tmp_path / "t.py"), src, why) == "written at helper.py:5"
    # a write at module level is the initial state, not the step's change
    (tmp_path / "helper.py").write_text("CACHE = []\nCACHE.append(0)\n")
    assert state_site(str(tmp_path / "t.py"), src, why) == "changed during train_step (t.py:4)"


def test_state_both_steps_change_alike_is_located_and_explained():
    from proofs.unknown import explain_unsupported

    path = PLANS / "torch10/r10_07_counter_steers_next_step.py"
    key = CHANGED + "the global _STEP of r10_07_counter_steers_next_step.py"
    (why,) = scalar_state_differences({key: "builtins.list[builtins.int:1]"},
                                      {key: "builtins.list[builtins.int:1]"})
    assert why.startswith("both steps change the global _STEP of ")
    site = state_site(str(path), path.read_text(), why)
    assert site == "written at r10_07_counter_steers_next_step.py:48", site
    assert explain_unsupported("state", f"{why} (rank (0,); {site})").code == "step-state"
