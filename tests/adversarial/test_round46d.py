"""Round 46d: break stop 46's last fixes (after round 46c), against 839169e
(``tests/adversarial/ATTEMPTS.md``, "Round 46d"). Plans in ``plans/round46d/``. Truth:
``tests/adversarial/torch4_truth.py FILE 2`` (dp 2) or ``tests/adversarial/mesh_truth.py FILE 4``
(HSDP 2 x 2).

R46d-1: ``fully_shard([w1, w2])`` is ONE FSDP2 state with one param group:
``set_gradient_divide_factor`` on either member sets the factor of both (torch 2.13: the
state's ``_fsdp_param_groups``). The stand-in makes each member its own ``DPUnit`` with its
own ``divide_factor``: a wrong plan (w2 summed for real) EQUIVALENT, its right control NOT
EQUIVALENT. Pre-existing (r46d_01 EQUIVALENT at 2f34073).

R46d-2: torch 2.13's ``foreach_reduce`` divides the WHOLE group's reduced gradients before it
sets any ``.grad`` or runs any hook; the stand-in's ``Hold.flush`` reads ``u.factor()`` member by
member, after the earlier members' post-accumulate-grad hooks ran: a hook on w1.weight setting
w2's factor changes w2's gradient in the stand-in only. Regression of stop 46's R46c-1 fix
(r46d_03 NOT EQUIVALENT at 2f34073).

R46d-3: the DDP-based composable ``replicate`` is no ``FSDPModule``: for real it has no
``set_gradient_divide_factor`` (``hasattr`` False); the stand-in installs the FSDP methods on
every replicate unit (``dataparallel._fsdp_methods``), so a plan branching on ``hasattr``
takes another branch there: a wrong plan EQUIVALENT.

R46d-4 (R46d-1's cause for other methods): ``unshard()`` / ``reshard()`` /
``set_reshard_after_backward`` on one member of a group act on the whole param group in torch,
on that member's unit only in the stand-in: wrong plans branching on ``model.w2.weight``'s type
EQUIVALENT (pre-existing: also at 2f34073).
"""

from __future__ import annotations

from pathlib import Path

import pytest

ROUND46D = Path(__file__).resolve().parent / "plans" / "round46d"

pytestmark = pytest.mark.slow


def _equivalent(out: dict) -> bool:
    return out["_rc"] == 0 and out.get("verdict") == "EQUIVALENT"


def _prove(path: Path, tmp_path: Path) -> dict:
    from tests.adversarial.torch_prove import prove

    return prove(path, tmp_path)


@pytest.mark.parametrize("name", [
    "r46d_01_group_member_divide_factor_shared_wrong.py",
    "r46d_11_hsdp_group_member_divide_factor_shared_wrong.py",
])
def test_r46d_1_group_member_divide_factor_not_equivalent(name, tmp_path):
    """R46d-1: ``model.w1.set_gradient_divide_factor`` on group [w1, w2] (+ root), only w1's
    gradient compensated: for real w2 is scaled too. Truth wrong (r46d_01 w2 0.0033; r46d_11
    HSDP 2x2, factor 2 of 4, w2 0.0057); EQUIVALENT at 839169e (28 / 65 s) and r46d_01 at
    2f34073: pre-existing. Since stop 46 (a method on a group member acts on every member:
    ``fsdp_methods``): NOT EQUIVALENT (15 / 24 s)."""
    out = _prove(ROUND46D / name, tmp_path)
    assert out["_rc"] == 1 and out.get("verdict") == "NOT EQUIVALENT", out


def test_r46d_1_group_member_divide_factor_right_equivalent(tmp_path):
    """R46d-1's right control: both members' gradients halved after factor 1 set via w1.
    Truth right (1.4e-17); NOT EQUIVALENT at 839169e (41 s); EQUIVALENT since stop 46 (16 s)."""
    out = _prove(ROUND46D / "r46d_02_group_member_divide_factor_shared_right.py", tmp_path)
    assert _equivalent(out), out


def test_r46d_2_hook_sets_mate_factor_not_equivalent(tmp_path):
    """R46d-2: a post-accumulate hook on w1.weight (group [w1, w2]) sets factor 1 via
    ``model.w2``; w2 halved after. For real the group was divided before the hook (w2 the
    mean, halved: wrong, w2 0.0016); the stand-in divides w2 after the hook (the sum, halved).
    EQUIVALENT at 839169e (32 s); NOT EQUIVALENT at 2f34073: a regression of R46c-1's fix, fixed in stop 46
    (``fsdp_grads.flush_state`` reads the factor once per state first): NOT EQUIVALENT (15 s)."""
    out = _prove(ROUND46D / "r46d_03_group_hook_sets_mate_factor_after_reduce_wrong.py",
                 tmp_path)
    assert out["_rc"] == 1 and out.get("verdict") == "NOT EQUIVALENT", out


def test_r46d_3_ddp_replicate_hasattr_divide_factor_not_equivalent(tmp_path):
    """R46d-3: DDP-based ``replicate``; the plan doubles the gradients when the module has no
    ``set_gradient_divide_factor`` (torch: none -> doubled, wrong w2 0.0118); the stand-in has
    one. EQUIVALENT at 839169e (27 s); NOT EQUIVALENT since stop 46 (the DDP-based replicate
    gets only its own methods; 14 s)."""
    out = _prove(ROUND46D / "r46d_05_ddp_replicate_has_no_divide_factor_wrong.py", tmp_path)
    assert out["_rc"] == 1 and out.get("verdict") == "NOT EQUIVALENT", out


@pytest.mark.parametrize("name", [
    "r46d_12_group_member_unshard_acts_on_group_wrong.py",
    "r46d_13_group_member_reshard_after_backward_wrong.py",
])
def test_r46d_4_group_member_methods_not_equivalent(name, tmp_path):
    """R46d-4: ``model.w1.unshard()`` after the backward (r46d_12) or
    ``model.w1.set_reshard_after_backward(False)`` (r46d_13) on group [w1, w2]: for real
    ``model.w2.weight`` is the unsharded Parameter, the plan doubles the gradients. Truth
    wrong (w0 0.0064, w2 0.0033); EQUIVALENT at 839169e (15 / 14 s) and at 2f34073; NOT
    EQUIVALENT since stop 46 (16 / 15 s)."""
    out = _prove(ROUND46D / name, tmp_path)
    assert out["_rc"] == 1 and out.get("verdict") == "NOT EQUIVALENT", out


@pytest.mark.parametrize("name", [
    "r46d_04_hook_sets_root_factor_before_final_right.py",
    "r46d_07_zero_grad_keep_whole_bumped_right.py",
    "r46d_14_final_callback_group_apart_hook_sees_later_unit_right.py",
    "r46d_15_divide_factor_between_two_backwards_right.py",
])
def test_r46d_right_plans_equivalent(name, tmp_path):
    """Right plans (truth <= 5.6e-17): a hook on unit w2 sets the root's factor before the
    root's post-backward in the final callback (41 s); ``zero_grad(set_to_none=False)`` then
    the whole kept gradient +1 (30 s); group [w0, w2] with unit w1 between them, all in the
    final callback, a hook on w2 sees w1 not yet resharded (24 s); the divide factor changed
    between two backwards of one step (15 s)."""
    out = _prove(ROUND46D / name, tmp_path)
    assert _equivalent(out), out


@pytest.mark.parametrize("name", [
    "r46d_06_zero_grad_keep_local_row_bumped_wrong.py",
    "r46d_08_zero_grad_keep_local_arange_wrong.py",
    "r46d_09_zero_grad_keep_rank_bumped_wrong.py",
    "r46d_10_zero_grad_keep_add_local_sample_wrong.py",
])
def test_r46d_zero_grad_keep_local_writes_not_equivalent(name, tmp_path):
    """R46c-3 attacks: ``zero_grad(set_to_none=False)`` then per-shard writes into the kept
    (constant) gradients: a local row, a local arange, + rank, + this rank's first sample.
    Truth wrong (0.1 / 0.5 / 0.1 / 0.19); UNKNOWN at 839169e (not lowered: slice write,
    arange as a number, rank-varying constant, select on batch; 29-43 s): sound."""
    out = _prove(ROUND46D / name, tmp_path)
    assert not _equivalent(out), out
