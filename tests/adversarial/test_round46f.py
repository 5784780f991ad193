"""Round 46f: break stop 46's last fix (the DDP-based ``replicate`` makes the module a
``DDP<cls>``; every class the stand-in makes has torch's raising ``__deepcopy__``), against
50dcffd (``tests/adversarial/ATTEMPTS.md``, "Round 46f"). Plans in ``plans/round46f/``.
Truth: ``tests/adversarial/torch4_truth.py FILE 2`` (dp 2).

R46f-1: torch 2.13 defines ``set_requires_gradient_sync`` / ``register_comm_hook`` on the
class ``DDP`` (``reshard`` & co. on ``FSDPModule``); ``dataparallel.record_data_parallel``
installs its recording methods on the instance (``object.__setattr__``), so they are in
``vars(model)``. A plan doubling the gradients when the model has the method but not in its
``__dict__`` is wrong for real (the serial spec has no method), EQUIVALENT (r46f_01 DDP-based
replicate, r46f_06 fully_shard).

R46f-2 (same cause): ``copy.copy(model)`` of a ``DDP<cls>`` goes through ``DDP.__new__``
(``cls.__mro__[2]``) and is a plain ``MLP`` for real, without the DDP methods; the stand-in's
copy carries the instance-installed methods in its ``__dict__``: EQUIVALENT (r46f_02).

R46f-3: torch refuses at the call a ``replicate`` on a module ``fully_shard`` manages
(RuntimeError, ``_is_fully_sharded``, r46f_09) and a second ``replicate`` of one module
(``contract``'s AssertionError "can only be applied to a module once", r46f_11): the plan
cannot run for real; the stand-in proves it EQUIVALENT.

R46f-4 (needless refusal): ``copy.deepcopy`` of a submodule no replicate wraps (an EMA of
``model.w0``), updated in place under ``no_grad``: capture fails with RecursionError (r46f_03).

R46f-5 (needless refusal): an EMA ``copy.deepcopy(model)`` made in ``parallelize`` before
``replicate`` (a global of real tensors) updated in the step: capture fails, FakeTensor
"convert all Tensors" (r46f_07).

Stop 53 fixed R46f-4 / R46f-5 (``spec_lang/torch_frontend/deep_copies.py``); mutants
r46f_12 .. r46f_15 check that an EMA written back into the model is not EQUIVALENT.

R46f-6 (needless refusal, R46e-4's cause): ``DDP.set_requires_gradient_sync(model, True)``
through the class reads ``replicate.state(model)`` (None in the stand-in): rc 3 (r46f_04);
the wrong ``False`` variant (r46f_05) is refused alike: sound.
"""

from __future__ import annotations

from pathlib import Path

import pytest

ROUND46F = Path(__file__).resolve().parent / "plans" / "round46f"

pytestmark = pytest.mark.slow


def _equivalent(out: dict) -> bool:
    return out["_rc"] == 0 and out.get("verdict") == "EQUIVALENT"


def _prove(path: Path, tmp_path: Path) -> dict:
    from tests.adversarial.torch_prove import prove

    return prove(path, tmp_path)


@pytest.mark.parametrize("name", [
    "r46f_01_ddp_method_in_instance_dict_wrong.py",
    "r46f_06_fsdp_method_in_instance_dict_wrong.py",
])
def test_r46f_1_method_in_instance_dict_not_equivalent(name, tmp_path):
    """R46f-1: doubling when ``hasattr(model, m) and m not in vars(model)``: truth wrong
    (w2 0.0033); EQUIVALENT at 50dcffd (r46f_01 49 s, r46f_06 56 s). Since stop 46 (the
    recording methods are the made class's, ``dataparallel._as_fsdp_module``): NOT
    EQUIVALENT (55 / 49 s)."""
    out = _prove(ROUND46F / name, tmp_path)
    assert out["_rc"] == 1 and out.get("verdict") == "NOT EQUIVALENT", out


def test_r46f_2_shallow_copy_has_no_methods_not_equivalent(tmp_path):
    """R46f-2: doubling when the model has ``register_comm_hook`` and its ``copy.copy`` has
    not: truth wrong (w2 0.0033); EQUIVALENT 45 s at 50dcffd; NOT EQUIVALENT since stop 46
    (46 s: the copy is a plain MLP through ``DDP.__new__``, as for real)."""
    out = _prove(ROUND46F / "r46f_02_ddp_shallow_copy_has_no_methods_wrong.py", tmp_path)
    assert out["_rc"] == 1 and out.get("verdict") == "NOT EQUIVALENT", out


@pytest.mark.parametrize("name", [
    "r46f_09_replicate_on_fully_sharded_raises.py",
    "r46f_11_replicate_twice_raises.py",
])
def test_r46f_3_call_torch_refuses_not_equivalent(name, tmp_path):
    """R46f-3: the real run raises in ``parallelize`` (RuntimeError / AssertionError);
    EQUIVALENT at 50dcffd (r46f_09 65 s, r46f_11 50 s). Since stop 46 (``once`` in
    ``record_data_parallel``, torch's ``contract`` checks): exit 3 naming the line (11-12 s)."""
    out = _prove(ROUND46F / name, tmp_path)
    assert out["_rc"] == 3 and "R46f-3" in out["_err"], out


@pytest.mark.xfail(strict=True, reason="R46f-6: needless refusal (replicate.state None)")
@pytest.mark.parametrize("name", [
    "r46f_04_class_method_call_right.py",
])
def test_r46f_needless_refusals_equivalent(name, tmp_path):
    """Right plans (truth <= 1.4e-17) refused at 50dcffd: rc 3 (30 s)."""
    out = _prove(ROUND46F / name, tmp_path)
    assert _equivalent(out), out


@pytest.mark.parametrize("name", [
    "r46f_03_deepcopy_unwrapped_submodule_right.py",
    "r46f_15_step_deepcopy_written_back_right.py",
])
def test_r46f_4_deep_copies_of_parameters_refused_with_their_reason(name, tmp_path):
    """R46f-4, right plans (truth <= 2.2e-19): rc 3 at 50dcffd (RecursionError 22 s). At
    9d1f70c EQUIVALENT (a fake tensor's deep copy a traced clone), but a parameter's copy and
    a plain tensor's differ and the step can mark a tensor ``_is_param`` itself (R53b-4,
    R53c-4): since round 53c a deep copy of a parameter in the step is refused, exit 3
    naming that reason (not a RecursionError)."""
    out = _prove(ROUND46F / name, tmp_path)
    assert out["_rc"] == 3 and "copy.deepcopy of a parameter" in out["_err"], out


def test_r46f_5_ema_updated_in_step_unknown(tmp_path):
    """R46f-5's EMA updated in the step (r46f_07): EQUIVALENT at 9d1f70c, UNKNOWN since round
    53b (R53b-3: the EMA's version counter, readable past the ``_version`` guard, is state the
    next step can branch on; the fingerprint compares it again): a needless refusal, never a
    false accept; 48 s. Not exit 3: the deep copy is no alias of a parameter (R53b-2)."""
    out = _prove(ROUND46F / "r46f_07_ema_deepcopy_before_replicate_right.py", tmp_path)
    assert out["_rc"] == 2 and out.get("verdict") == "UNKNOWN", out


@pytest.mark.parametrize("name,rc", [
    ("r46f_12_ema_written_back_wrong.py", 2),
    ("r46f_14_step_deepcopy_written_back_wrong.py", 3),   # a parameter's copy: refused
])
def test_r46f_4_5_deep_copies_written_back_not_equivalent(name, rc, tmp_path):
    """Mutants of the stop-53 fix, truth wrong: r46f_12 blends the EMA (copied on meta in
    ``parallelize``) back into the parameters (w0 0.0042): UNKNOWN, the EMA's values are not
    traced; r46f_14 copies the step's deep copy back on the parallel run only (w0 0.0066):
    NOT EQUIVALENT at w0 at 9d1f70c, exit 3 since round 53c (a parameter's deep copy)."""
    out = _prove(ROUND46F / name, tmp_path)
    assert out["_rc"] == rc and not _equivalent(out), out
    if rc == 2:
        assert "neither makes nor takes as an input" in str(out), out
    else:
        assert "copy.deepcopy of a parameter" in out["_err"], out


def test_r46f_5_ema_shares_parameter_refused(tmp_path):
    """Mutant of the stop-53 fix: ``model.w0.weight = EMA w0.weight`` after the deep copy, so
    the EMA update scales the model's weight for real (truth wrong, w0 0.0076): refused at
    ``parallelize`` (the parameter is not the one build_model made), exit 3."""
    out = _prove(ROUND46F / "r46f_13_ema_shares_parameter_wrong.py", tmp_path)
    assert out["_rc"] == 3 and "w0.weight" in out["_err"], out


def test_r46f_class_method_no_sync_not_equivalent(tmp_path):
    """``DDP.set_requires_gradient_sync(model, False)`` through the class: truth wrong
    (w2 0.0064); rc 3 28 s at 50dcffd (capture fails: state None): sound."""
    out = _prove(ROUND46F / "r46f_05_class_method_no_sync_wrong.py", tmp_path)
    assert not _equivalent(out), out


@pytest.mark.parametrize("name", [
    "r46f_08_replicate_then_fully_shard_child_right.py",
    "r46f_10_replicate_submodules_class_name_right.py",
])
def test_r46f_right_plans_equivalent(name, tmp_path):
    """Right plans (truth <= 1.4e-17): replicate then fully_shard on a child; replicate on
    submodules branching on ``DDPLinear`` / ``__mro__[2]``: EQUIVALENT 56 s / 47 s."""
    out = _prove(ROUND46F / name, tmp_path)
    assert _equivalent(out), out
