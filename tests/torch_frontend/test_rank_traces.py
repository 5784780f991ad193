"""Which ranks are traced and what is checked across them (``traced_ranks.rank_coords``,
``literals.Traces``): a small mesh is traced at every rank, its corners (ranks off the mesh's
axes, finding R3-2) checked against the ranks on the axes; a literal argument that differs on
some rank must be read per rank by a rule, and a captured constant must be the same on every
trace (lead's review, stop 24: a rank summing over another dim was proved for rank 0 only)."""

from __future__ import annotations

import os

import pytest
import torch
import torch.fx as fx

from spec_lang.torch_frontend.capture import _is_next_to
from spec_lang.torch_frontend.traced_ranks import FULL_TRACE_RANKS, rank_coords, untraced_ranks
from spec_lang.torch_frontend.literals import GraphMismatch, Traces


def test_a_small_2d_mesh_is_traced_at_every_rank():
    coords = rank_coords({"dp": 2, "tp": 2})
    assert coords[0] == {"dp": 0, "tp": 0}
    assert sorted(tuple(c.values()) for c in coords) == [(0, 0), (0, 1), (1, 0), (1, 1)]
    assert untraced_ranks({"dp": 2, "tp": 2}) is None
    assert len(rank_coords({"dp": 2, "tp": 4})) == 8 == FULL_TRACE_RANKS


def test_a_large_2d_mesh_names_its_untraced_corners():
    coords = rank_coords({"dp": 4, "tp": 4})
    assert len(coords) == 1 + 3 + 3          # the axes only
    why = untraced_ranks({"dp": 4, "tp": 4})
    assert why is not None and "'dp': 1, 'tp': 1" in why and "not traced" in why


def _times(c: float):
    return lambda x: x * c


def _gm(fn) -> fx.GraphModule:
    return fx.symbolic_trace(fn)


def _scalar_node(gm: fx.GraphModule) -> fx.Node:
    return next(n for n in gm.graph.nodes if n.op in ("call_function", "call_method"))


def _traces(main_fn, ranks: dict[tuple[int, int], object]) -> Traces:
    """dp x tp = 2 x 2 traces of ``main_fn`` (rank (0, 0)) and the other ranks' functions."""
    return Traces(_gm(main_fn), {"dp": 0, "tp": 0}, {},
                  ranks=[({"dp": d, "tp": t}, _gm(fn), {}) for (d, t), fn in ranks.items()])


def test_a_corner_holding_the_literal_its_axes_predict_is_accepted():
    """A literal of tp (tp=0: 1.0, tp=1: 2.0): the corner (1, 1) holds tp=1's value."""
    t = _traces(lambda x: x * 1.0, {(1, 0): lambda x: x * 1.0, (0, 1): lambda x: x * 2.0,
                                    (1, 1): lambda x: x * 2.0})
    n = _scalar_node(t.main)
    rv = t.scalar(n, 1, 1.0)
    assert rv.axis == "tp" and rv.values == {0: 1.0, 1: 2.0}
    assert t.unread_rank_literals() == []


@pytest.mark.parametrize("corner", [3.0, 1.0])
def test_a_corner_holding_another_literal_is_refused(corner):
    """R3-2 at a corner: 3.0 (a rank-specific special case) or 1.0 (tp=1's 2.0 not taken)."""
    t = _traces(lambda x: x * 1.0, {(1, 0): lambda x: x * 1.0, (0, 1): lambda x: x * 2.0,
                                    (1, 1): _times(corner)})
    with pytest.raises(ValueError, match=r"rank \{'dp': 1, 'tp': 1\}"):
        t.scalar(_scalar_node(t.main), 1, 1.0)


def test_a_corner_changing_a_literal_no_axis_changes_is_refused():
    t = _traces(lambda x: x * 1.0, {(1, 0): lambda x: x * 1.0, (0, 1): lambda x: x * 1.0,
                                    (1, 1): lambda x: x * 2.0})
    with pytest.raises(ValueError, match="several axes"):
        t.scalar(_scalar_node(t.main), 1, 1.0)


def test_a_corner_with_other_ops_is_a_graph_mismatch():
    with pytest.raises(GraphMismatch, match=r"rank \{'dp': 1, 'tp': 1\}"):
        _traces(lambda x: x * 1.0, {(1, 0): lambda x: x * 1.0, (0, 1): lambda x: x * 1.0,
                                    (1, 1): lambda x: x + 1.0})


def test_a_list_literal_that_differs_on_a_rank_and_is_not_read_is_reported():
    """``x.sum(dim=[rank])``: a rule reading ``n.args`` itself would lower rank 0's program."""
    t = Traces(_gm(lambda x: x.sum([0])), {"dp": 0}, {},
               ranks=[({"dp": 1}, _gm(lambda x: x.sum([1])), {})])
    unread = t.unread_rank_literals()
    assert len(unread) == 1
    node, why = unread[0]
    assert node.target == "sum" and "argument 1[0]" in why
    assert "is 1 on rank {'dp': 1} and 0 on rank {'dp': 0}" in why, why


def test_a_literal_read_per_rank_is_not_reported():
    t = Traces(_gm(lambda x: x * 1.0), {"dp": 0}, {},
               ranks=[({"dp": 1}, _gm(lambda x: x * 2.0), {})])
    assert len(t.unread_rank_literals()) == 1
    t.scalar(_scalar_node(t.main), 1, 1.0)
    assert t.unread_rank_literals() == []


class _Const(torch.nn.Module):
    def __init__(self, v: float):
        super().__init__()
        self.c = torch.tensor(v)

    def forward(self, x):
        return x * self.c


def test_a_captured_constant_that_differs_on_a_rank_or_at_real_sizes_is_named():
    main = fx.symbolic_trace(_Const(1.0))
    node = next(n for n in main.graph.nodes if n.op == "get_attr")
    same = Traces(main, {"dp": 0}, {}, ranks=[({"dp": 1}, fx.symbolic_trace(_Const(1.0)), {})])
    assert same.constant_differs(node) is None
    rank = Traces(main, {"dp": 0}, {}, ranks=[({"dp": 1}, fx.symbolic_trace(_Const(2.0)), {})])
    assert "differs at rank {'dp': 1}" in rank.constant_differs(node)
    real = Traces(main, {}, {}, real=fx.symbolic_trace(_Const(7.0)))
    assert "differs at real sizes" in real.constant_differs(node)


def test_torch_op_namespaces_are_not_modules_next_to_the_train_file():
    """``torch.ops`` says ``__file__ = "_ops.py"``: relative, so ``realpath`` put it in the
    working directory, and a train file run from its own folder had torch's op cache read as
    its state (a false UNKNOWN: "the parallel step changes the global _dir of _ops.py")."""
    assert torch.ops.__file__ == "_ops.py"
    assert not _is_next_to(torch.ops, os.getcwd())
    assert _is_next_to(os, os.path.dirname(os.path.realpath(os.__file__)))
