"""Adversarial round 38d (``tests/adversarial/ATTEMPTS.md``, "Round 38d"), against wip/r38 at
ba967a7 (``caught``'s final form: the recorder a constant of the code objects; function bodies,
``with`` bodies and ``try``-with-``finally`` parts guarded; R38c-5's ``nn.Module.__getattr__``
allowance). Plans in ``plans/round38d/``. Truth: ``tests/adversarial/torch4_truth.py FILE 1``
(dp 2, gloo, float64).
"""

from __future__ import annotations

from pathlib import Path

import pytest

ROUND38D = Path(__file__).resolve().parent / "plans" / "round38d"


def _not_accepted(out: dict) -> bool:
    """Anything but EQUIVALENT (NOT EQUIVALENT, UNKNOWN or a refusal)."""
    return out["_rc"] != 0 and out.get("verdict") != "EQUIVALENT"


def _equivalent(out: dict) -> bool:
    return out["_rc"] == 0 and out.get("verdict") == "EQUIVALENT"


def _prove(name: str, tmp_path: Path) -> dict:
    from tests.adversarial.torch_prove import prove

    return prove(ROUND38D / name, tmp_path)


# -- findings (open): strict xfails ---------------------------------------------------------------


@pytest.mark.slow
def test_r38d_1_exitstack_lambda_callback_is_not_accepted(tmp_path):
    """EQUIVALENT at ba967a7 (4 goals, 64 s); truth w1 0.0070, w2 0.0093.
    Fixed in round 38 (``caught``: a lambda's body is called through a guard that
    records what it raises, 844763d)."""
    out = _prove("r38d_01_dp_exitstack_lambda_callback_lr_wrong.py", tmp_path)
    assert _not_accepted(out), out
    assert out["_rc"] == 3, out


@pytest.mark.slow
def test_r38d_1_weakref_finalize_lambda_is_not_accepted(tmp_path):
    """EQUIVALENT at ba967a7 (4 goals, 73 s); truth w1 0.0070, w2 0.0093.
    Fixed in round 38 (``caught``: a lambda's body is called through a guard that
    records what it raises, 844763d)."""
    out = _prove("r38d_02_dp_weakref_finalize_lambda_lr_wrong.py", tmp_path)
    assert _not_accepted(out), out
    assert out["_rc"] == 3, out


@pytest.mark.slow
def test_r38d_1_logging_formatter_lambda_is_not_accepted(tmp_path):
    """EQUIVALENT at ba967a7 (4 goals, 65 s); truth w1 0.0070, w2 0.0093.
    Fixed in round 38 (``caught``: a lambda's body is called through a guard that
    records what it raises, 844763d)."""
    out = _prove("r38d_04_dp_logging_formatter_lambda_lr_wrong.py", tmp_path)
    assert _not_accepted(out), out
    assert out["_rc"] == 3, out


@pytest.mark.slow
@pytest.mark.xfail(strict=True, reason="R38d-2: a probe of fake-ness with no exception in the "
                   "capture (hasattr(g, 'fake_mode')): caught has nothing to record")
def test_r38d_2_hasattr_fake_mode_is_not_accepted(tmp_path):
    """EQUIVALENT at ba967a7 (4 goals, 63 s); truth w1 0.0070, w2 0.0093."""
    out = _prove("r38d_03_dp_hasattr_fake_mode_lr_wrong.py", tmp_path)
    assert _not_accepted(out), out


@pytest.mark.slow
@pytest.mark.xfail(strict=True, reason="R38d-2: an allowed KeyError raised for a fake-only "
                   "reason (the dict lookup of type(g).__name__: 'FakeTensor' in the capture)")
def test_r38d_2_keyerror_on_tensor_type_name_is_not_accepted(tmp_path):
    """EQUIVALENT at ba967a7 (4 goals, 49 s); truth w1 0.0070, w2 0.0093."""
    out = _prove("r38d_08_dp_keyerror_on_tensor_type_name_lr_wrong.py", tmp_path)
    assert _not_accepted(out), out


# -- false refusals (open): strict xfails asserting EQUIVALENT ---------------------------------

@pytest.mark.slow
@pytest.mark.xfail(strict=True, reason="R38d-3: an AttrDict's __getattr__ raising AttributeError "
                   "for getattr(cfg, name, default) is recorded through its guarded body")
def test_r38d_3_attrdict_getattr_default_is_equivalent(tmp_path):
    """exit 3 at ba967a7 (15 s: AttributeError raised through line 44); truth 6e-17 / 0."""
    out = _prove("r38d_06_dp_attrdict_getattr_default_right.py", tmp_path)
    assert _equivalent(out), out


# -- sound outcomes -------------------------------------------------------------------------------

@pytest.mark.slow
def test_r38d_05_context_decorator_global_is_not_accepted(tmp_path):
    """UNKNOWN at ba967a7 (73 s): the global _Quiet unreadable; truth w1 0.0070, w2 0.0093."""
    out = _prove("r38d_05_dp_sorted_key_lambda_in_suppress_decorated_lr_wrong.py", tmp_path)
    assert _not_accepted(out), out


@pytest.mark.slow
def test_r38d_07_realistic_contexts_is_equivalent(tmp_path):
    """EQUIVALENT at ba967a7 (4 goals, 40 s); truth 6e-17 / 0 (right)."""
    out = _prove("r38d_07_dp_realistic_contexts_right.py", tmp_path)
    assert _equivalent(out), out


@pytest.mark.slow
def test_r38d_09_module_getattr_fake_only_name_is_not_accepted(tmp_path):
    """exit 3 at ba967a7 (27 s); truth w1 0.0070, w2 0.0093. Sound only while R38d-4 holds:
    a fix of R38c-5's allowance inside the capture must keep this refused."""
    out = _prove("r38d_09_dp_module_getattr_fake_only_name_lr_wrong.py", tmp_path)
    assert _not_accepted(out), out


@pytest.mark.slow
def test_r38d_1_sorted_key_lambda_context_decorator_is_not_accepted(tmp_path):
    """EQUIVALENT at ba967a7 (4 goals, 37 s); truth w1 0.0070, w2 0.0093.
    Fixed in round 38 (``caught``: a lambda's body is called through a guard that
    records what it raises, 844763d)."""
    out = _prove("r38d_10_dp_sorted_key_lambda_local_context_decorator_lr_wrong.py", tmp_path)
    assert _not_accepted(out), out
    assert out["_rc"] == 3, out
