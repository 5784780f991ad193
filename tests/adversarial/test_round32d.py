"""Adversarial round 32d (``tests/adversarial/ATTEMPTS.md``, "Round 32d"), against wip/adv32d at
52ab29b (= main: stop 32's ``dispatcher_guard`` after round 32b: the ``_LoggedModule`` log of
kernels registered through ``torch.library`` libraries, the Python dispatcher's enabling by the
train file logged, ``DispatchKey`` entries of ``_dispatch_cache`` checked with ``resolve_key``;
R32b-4's ``RankValues.real_values``). Plans in ``plans/round32d/``. Truth:
``tests/adversarial/torch4_truth.py FILE 2`` (dp), ``tests/adversarial/tp_truth.py FILE`` (dp x
tp); gloo, float64.

* R32d-1 (false accept; ``r32d_01`` dp 2): a ``HigherOrderOperator`` made in the step
  dispatches its ``py_kernels`` in Python without the Python dispatcher; its CPU kernel leaves
  the all-reduced gradient summed, its ``python_key_table`` entries for the capture's modes
  divide; popped from ``_higher_order_ops`` and its tables cleared before the post-step scan.
  Truth 0.0070 / 0.0093 (control ``r32d_02`` 2.8e-17, EQUIVALENT).
* R32d-2 (false accept; ``r32d_03`` dp 2): torch's ``_EnablePythonDispatcher`` taken out of the
  guard's wrapper's closure (cell ``enable``): r32b_02 unlogged. The r32b_06 family. Truth
  0.0070 / 0.0093.
* R32d-3 (false accept; ``r32d_04`` dp 2): ``_LoggedModule._m`` is torch's raw module:
  ``lib.m._m.impl`` registers a CPU kernel of ``aten::div_.Tensor`` in the step unlogged and
  ``reset()`` removes it; the library is made at import at a forged torch site. Truth 0.0070 /
  0.0093.
* R32d-4 (false refusal; ``r32d_07``, ``r32d_06`` dp 2 x tp 2): ``check_real_ranks`` compares the
  dp group's torchbind constant across tp coordinates: every hand-written ``dist`` collective
  over one axis of a 2-axis mesh is refused (exit 3). Truth 2.8e-17 / 0.0. Fixed in stop 33:
  the group is compared by axis (``literals.same_constant``), and the tensor a ``c10d`` op
  returns is the tensor it was given (``aliasing.c10d_returned``: ``g.div_`` after
  ``dist.all_reduce(g)`` on a view ``g`` was lost, r32d_06 refuted 2x). Mutants ``r32d_11`` ..
  ``r32d_13`` (r32d_13: the lost write as a false accept on dp 2, truth 0.0070).
* R32d-5 (false accept; ``r32d_09`` dp 2 x tp 2): R32b-4 at the off-axis corner (dp 1, tp 1):
  ``RankValues.real_values`` holds the on-axis ranks only. Truth 0.051 (control ``r32d_10`` 0.0,
  EQUIVALENT).
"""

from __future__ import annotations

from pathlib import Path

import pytest

ROUND32D = Path(__file__).resolve().parent / "plans" / "round32d"


def _not_accepted(out: dict) -> bool:
    """Anything but EQUIVALENT (NOT EQUIVALENT, UNKNOWN or a refusal)."""
    return out["_rc"] != 0 and out.get("verdict") != "EQUIVALENT"


def _equivalent(out: dict) -> bool:
    return out["_rc"] == 0 and out.get("verdict") == "EQUIVALENT"


def _prove(name: str, tmp_path: Path) -> dict:
    from tests.adversarial.torch_prove import prove

    return prove(ROUND32D / name, tmp_path)


# -- findings (strict xfail: the right outcome asserted) ---------------------------------------

@pytest.mark.slow
def test_r32d_1_dp_hop_made_in_step_is_not_accepted(tmp_path):
    """EQUIVALENT at 52ab29b (4 goals, 43 s); truth update 0.0070 / 0.0093."""
    out = _prove("r32d_01_dp_hop_made_in_step.py", tmp_path)
    assert _not_accepted(out), out


@pytest.mark.slow
def test_r32d_1_control_right_hop_is_equivalent(tmp_path):
    """The same HOP with a right CPU kernel: truth 2.8e-17, EQUIVALENT at 52ab29b (85 s). When
    R32d-1 is fixed by refusing any HOP made in the step this may turn into a refusal: a
    train file's own HigherOrderOperator is not a normal plan, so that refusal is acceptable."""
    out = _prove("r32d_02_dp_hop_made_in_step_right.py", tmp_path)
    assert _equivalent(out) or out["_rc"] == 3, out


@pytest.mark.slow
@pytest.mark.xfail(strict=True, reason="R32d-2: torch's _EnablePythonDispatcher taken out of the "
                   "guard's wrapper's closure (the R32b-3 r32b_06 family)")
def test_r32d_2_dp_python_dispatcher_from_closure_is_not_accepted(tmp_path):
    """EQUIVALENT at 52ab29b (4 goals, 81 s); truth update 0.0070 / 0.0093."""
    out = _prove("r32d_03_dp_python_dispatcher_from_closure.py", tmp_path)
    assert _not_accepted(out), out


@pytest.mark.slow
@pytest.mark.xfail(strict=True, reason="R32d-3: the raw _DispatchModule behind _LoggedModule "
                   "(lib.m._m.impl / reset) registers and removes a kernel in the step unlogged")
def test_r32d_3_dp_logged_module_raw_m_impl_is_not_accepted(tmp_path):
    """EQUIVALENT at 52ab29b (4 goals, 65 s); truth update 0.0070 / 0.0093."""
    out = _prove("r32d_04_dp_logged_module_raw_m_impl.py", tmp_path)
    assert _not_accepted(out), out


@pytest.mark.slow
def test_r32d_4_dp_tp_replicated_ddp_right_is_equivalent(tmp_path):
    """t02_corner_rank_2d without the doubling (truth 2.8e-17): exit 3 at 52ab29b (126 s),
    "rank {'dp': 0, 'tp': 1} at the real sizes: the captured constant _torchbind_obj0
    differs from the zero coordinate's"; UNKNOWN in stop 32; EQUIVALENT since stop 33 (R32d-4
    fixed: the group compared by axis, ``literals.same_constant``)."""
    out = _prove("r32d_07_dp_tp_replicated_ddp_right.py", tmp_path)
    assert _equivalent(out), out


@pytest.mark.slow
def test_r32d_4_dp_tp_vocab_right_is_equivalent(tmp_path):
    """r32b_04 on dp 2 x tp 2 with a hand-written DDP (truth 0.0): exit 3 at 52ab29b (108 s);
    NOT EQUIVALENT 2x with the group compared by axis alone (0bb18a1): ``g = grad.to_local()``
    is a view, and ``g.div_`` after ``dist.all_reduce(g)`` wrote the c10d op's returned tensor,
    its own storage root (``lower._storage_roots``); EQUIVALENT since stop 33
    (``aliasing.c10d_returned``)."""
    out = _prove("r32d_06_dp_tp_vocab_right.py", tmp_path)
    assert _equivalent(out), out


@pytest.mark.slow
@pytest.mark.parametrize("name", [
    # the dp all-reduce over the tp group (truth w1 0.0088, w2 0.018)
    "r32d_11_dp_tp_ddp_over_tp_group_wrong.py",
    # divided by |tp| = 3 instead of |dp| = 2 on dp 2 x tp 3 (truth w1 0.0023, w2 0.0031)
    "r32d_12_dp_tp_ddp_divides_by_tp_size_wrong.py",
    # R32d-4's cause on dp 2: g.mul_(2.0) through the all-reduced view (truth w1 0.0070)
    "r32d_13_dp_view_all_reduce_scaled_after_wrong.py",
])
def test_r32d_4_mutants_of_the_hand_written_ddp_are_not_accepted(name, tmp_path):
    """R32d-4's wrong mutants (stop 33), with the dp group now compared by axis."""
    out = _prove(name, tmp_path)
    assert _not_accepted(out), out


@pytest.mark.slow
def test_r32d_dp_tp_vocab_offset_wrong_at_corner_is_not_accepted(tmp_path):
    """Corner-only real-size offset (truth 0.051): exit 3 at 52ab29b (R32d-4's reason). Stays
    asserted once R32d-4 is fixed: the corner's real-size values must then be checked."""
    out = _prove("r32d_05_dp_tp_vocab_offset_wrong_at_corner.py", tmp_path)
    assert _not_accepted(out), out


@pytest.mark.slow
def test_r32d_fsdp_tp_hand_written_masks_is_not_accepted(tmp_path):
    """FSDP2 x hand-written vocab-parallel masks (truth 0.095): UNKNOWN at 52ab29b (115 s)."""
    out = _prove("r32d_08_fsdp_tp_vocab_hand_written_masks.py", tmp_path)
    assert _not_accepted(out), out


@pytest.mark.slow
def test_r32d_5_dp_tp_vocab_offset_wrong_at_corner_is_not_accepted(tmp_path):
    """EQUIVALENT at 52ab29b (2 goals, 98 s); truth emb.weight 0.051 (control r32d_10 0.0)."""
    out = _prove("r32d_09_dp_tp_funcol_vocab_offset_wrong_at_corner.py", tmp_path)
    assert _not_accepted(out), out


@pytest.mark.slow
def test_r32d_5_control_dp_tp_funcol_vocab_right_is_equivalent(tmp_path):
    """r32d_09's control (truth 0.0): EQUIVALENT at 52ab29b (98 s)."""
    out = _prove("r32d_10_dp_tp_funcol_vocab_right.py", tmp_path)
    assert _equivalent(out), out


# -- R32d-4's cause, at graph level (seconds) --------------------------------------------------

def _all_reduce_through_a_view():
    """``g = w.view(-1); dist.all_reduce(g, group=pg); g.div_(2)`` as ``make_fx`` records it:
    ``dist.all_reduce`` points ``g`` at ``getitem(getitem(allreduce_, 0), 0)``."""
    import operator

    import torch
    import torch.fx as fx

    g = fx.Graph()
    w = g.placeholder("w")
    view = g.call_function(torch.ops.aten.view.default, (w, [-1]))
    pg, op = g.get_attr("_torchbind_obj0"), g.get_attr("_torchbind_obj1")
    ar = g.call_function(torch.ops.c10d.allreduce_.default, ([view], pg, op, None, False))
    lst = g.call_function(operator.getitem, (ar, 0))
    work = g.call_function(operator.getitem, (ar, 1))
    red = g.call_function(operator.getitem, (lst, 0))
    div = g.call_function(torch.ops.aten.div_.Tensor, (red, 2))
    g.output([w])
    return g, {"w": w, "view": view, "ar": ar, "lst": lst, "work": work, "red": red, "div": div}


def test_r32d_4_the_tensor_a_c10d_op_returns_is_the_tensor_it_was_given():
    """R32d-4's cause: the all-reduced ``g`` was its own storage root, so ``g.div_(|dp|)`` never
    reached the gradient ``g`` is a view of (r32d_06 refuted by 2x, truth 0.0; r32d_13, a
    ``g.mul_(2.0)`` written the same way on dp 2, accepted: truth 0.0070)."""
    from types import SimpleNamespace

    from spec_lang.torch_frontend.aliasing import c10d_returned
    from spec_lang.torch_frontend.lower import _storage_roots

    graph, n = _all_reduce_through_a_view()
    assert c10d_returned(n["red"]) is n["view"]
    assert c10d_returned(n["work"]) is None and c10d_returned(n["lst"]) is None
    roots = _storage_roots(SimpleNamespace(graph=graph))
    assert roots[n["red"]] == (n["w"], True)
    assert roots[n["div"]] == (n["w"], True)      # the division writes ``w``


def test_r32d_4_a_process_group_constant_is_each_ranks_group_of_one_axis():
    """``literals.same_constant`` (``Traces.constant_differs`` and ``real_ranks``): the dp group
    of tp coordinate 1 (another group) is the same constant; a group of another axis is not; a
    group of no mesh axis is compared by name."""
    from spec_lang.torch_frontend.literals import same_constant
    from spec_lang.torch_frontend.tracedata import ProcessGroupRef as Pg

    g0, g1 = {"1": "dp", "2": "tp"}, {"3": "dp", "4": "tp"}
    assert same_constant(Pg("1"), Pg("3"), g0, g1)
    assert not same_constant(Pg("1"), Pg("4"), g0, g1)
    assert not same_constant(Pg("9"), Pg("8"), g0, g1)
    assert same_constant(Pg("9"), Pg("9"), g0, g1)
