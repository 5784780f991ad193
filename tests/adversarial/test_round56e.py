"""Adversarial round 56e (``tests/adversarial/ATTEMPTS.md``, "Round 56e"): ee20f0e
(``process_state.key_text`` / ``prim_repr`` / ``_global_text``'s bound C methods /
``_lazy_cache``; ``step_state._plain`` and its ``key_text`` uses: R56d-1..5's fixes).

Plans in ``plans/round56e/``; the truth is ``python tests/adversarial/torch4_truth.py FILE 2``
(every ``_wrong`` plan doubles its gradients from the second step on: step 2 w0 0.0058). The
fast tests call ``process_state`` / ``step_state`` directly; the slow ones prove the plans.
"""

from __future__ import annotations

import colorsys
import json
import sys
import types
from pathlib import Path

import pytest

ROUND = Path(__file__).resolve().parent / "plans" / "round56e"


def _changes(change) -> list[str]:
    """The entries ``state_changes`` reports for ``change()`` between two ``_process_state``
    fingerprints (the test process's ``__main__`` entries left out)."""
    from spec_lang.torch_frontend.process_state import _process_state
    from spec_lang.torch_frontend.step_state import state_changes

    before = _process_state([], [])
    change()
    after = _process_state([], [])
    return sorted(k for k in state_changes(before, after) if "main" not in k)


class _K(str):
    """A ``str`` subclass key: equal to and hashed as its text, own attributes allowed."""


def _json_key(key) -> None:
    """Put ``key`` (equal to ``"decoder"``) in ``json``'s namespace for ``json.decoder``."""
    old = next(k for k in vars(json) if k == "decoder")
    del vars(json)[old]
    vars(json)[key] = sys.modules["json.decoder"]


@pytest.fixture
def json_restored():
    yield
    for k in [k for k in vars(json) if type(k) is not str]:
        del vars(json)[k]
    vars(json)["decoder"] = sys.modules["json.decoder"]
    vars(json).pop("r56e", None)


# -- R56e-1: a str-subclass key on a submodule entry is never read ----------------------------

@pytest.mark.state_modules("json")
def test_r56e_1_submodule_key_attribute_counter(json_restored):
    """``json``'s ``"decoder"`` key replaced by ``_K("decoder")`` with ``n`` 1 -> 2 (r56e_01)."""
    k1 = _K("decoder")
    k1.n = 1
    _json_key(k1)

    def bump():
        k2 = _K("decoder")
        k2.n = 2
        _json_key(k2)
    assert _changes(bump) == ["the module json"]


@pytest.mark.state_modules("json")
def test_r56e_1_control_plain_key_to_other_value(json_restored):
    """Control: the plain ``"decoder"`` key bound to another module is seen."""
    assert _changes(lambda: vars(json).__setitem__("decoder", colorsys)) == ["the module json"]


# -- R56e-2: a key's own __format__ runs in the submodule test ---------------------------------

class _F(str):
    calls = 0

    def __format__(self, spec):
        type(self).calls += 1
        return "decoder"


@pytest.mark.state_modules("json")
def test_r56e_2_key_format_called(json_restored):
    """``_process_state`` never calls a key's own ``__format__`` (r56e_02)."""
    from spec_lang.torch_frontend.process_state import _process_state

    vars(json)[_F("c1")] = sys.modules["json.decoder"]
    _F.calls = 0
    _process_state([], [])
    assert _F.calls == 0


@pytest.mark.state_modules("json")
def test_r56e_2_key_format_counter(json_restored):
    """``_F("c1")`` -> ``_F("c2")`` (constant ``__format__``), value ``json.decoder``."""
    vars(json)[_F("c1")] = sys.modules["json.decoder"]

    def bump():
        del vars(json)[next(k for k in vars(json) if type(k) is _F)]
        vars(json)[_F("c2")] = sys.modules["json.decoder"]
    assert _changes(bump) == ["the module json"]


class _Boom:
    def __format__(self, spec):
        raise RuntimeError("r56e")


@pytest.mark.state_modules("json")
def test_r56e_4_key_format_raises(json_restored):
    """A non-str key whose ``__format__`` raises, its value a module: no exception."""
    from spec_lang.torch_frontend.process_state import _process_state

    vars(json)[_Boom()] = colorsys
    assert isinstance(_process_state([], []), dict)


# -- R56e-3: a C method's object read by identity, not its own attributes ----------------------

@pytest.mark.state_modules("json")
def test_r56e_3_control_encoder_global(json_restored):
    """Control (R56a-3): ``json.r56e`` an encoder, ``indent`` 1 -> 2 in place: seen."""
    enc = json.JSONEncoder(indent=1)
    json.r56e = enc
    assert _changes(lambda: setattr(enc, "indent", 2)) == ["the module json"]


@pytest.mark.state_modules("json")
def test_r56e_3_bound_c_method_object_attribute(json_restored):
    """``json.r56e = enc.__sizeof__``, ``enc.indent`` 1 -> 2 in place (r56e_03)."""
    enc = json.JSONEncoder(indent=1)
    json.r56e = enc.__sizeof__
    assert _changes(lambda: setattr(enc, "indent", 2)) == ["the module json"]


@pytest.mark.state_modules("json")
def test_r56e_3_bound_python_method_object_attribute(json_restored):
    """``json.r56e = enc.encode``, ``enc.indent`` 1 -> 2 in place."""
    enc = json.JSONEncoder(indent=1)
    json.r56e = enc.encode
    assert _changes(lambda: setattr(enc, "indent", 2)) == ["the module json"]


# -- R56e-5: a non-str key in torch's registry modules crashes step_state ----------------------

@pytest.mark.state_modules("torch.nn.modules.module")
def test_r56e_5_registry_module_int_key():
    import torch

    from spec_lang.torch_frontend.step_state import step_state

    mod = sys.modules["torch.nn.modules.module"]
    model = torch.nn.Linear(2, 2)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    vars(mod)[0] = 0
    try:
        assert isinstance(step_state(model, opt, []), dict)
    finally:
        del vars(mod)[0]


# -- the plans ----------------------------------------------------------------------------------

def _prove(path: Path) -> int:
    from proofs.cli import prove_main

    return prove_main(["--torch", str(path), "--jobs", "1", "--no-check"])


@pytest.mark.slow
def test_r56e_01_submodule_key_counter_not_equivalent():
    assert _prove(ROUND / "r56e_01_counter_in_str_subclass_submodule_key_wrong.py") != 0


@pytest.mark.slow
def test_r56e_02_key_format_counter_not_equivalent():
    assert _prove(ROUND / "r56e_02_counter_in_key_format_submodule_wrong.py") != 0


@pytest.mark.slow
def test_r56e_03_bound_c_method_object_counter_not_equivalent():
    assert _prove(ROUND / "r56e_03_counter_in_object_of_bound_c_method_wrong.py") != 0


@pytest.mark.slow
def test_r56e_04_tempfile_rng_attribute_counter_not_equivalent():
    assert _prove(ROUND / "r56e_04_counter_in_tempfile_rng_attribute_wrong.py") != 0


# -- R56e-6: tempfile's exempt generator may hold anything ------------------------------------

@pytest.mark.state_modules("tempfile")
def test_r56e_6_tempfile_rng_attribute():
    """``tempfile._name_sequence.rng.r56e`` set (same pid, a ``random.Random``: was exempt)."""
    import tempfile

    rng = tempfile._get_candidate_names().rng
    vars(rng).pop("r56e", None)
    try:    # the lead's fix: set on a fresh generator (r56e_04's first step), it is a change
        assert _changes(lambda: setattr(rng, "r56e", 1)) == ["the module tempfile"]
    finally:    # (1 -> 2 on it afterwards is a change inside a held object: the open list)
        vars(rng).pop("r56e", None)
