"""Adversarial finding R24-1 (round 24, ``tests/adversarial/ATTEMPTS.md`` "Rounds 23 and 24";
its plans were lost with their branch and are rebuilt in ``plans/round24/``): the zero
coordinate's probe and real-size traces were aligned on computing nodes only, so data movement
that differs only at the real sizes (a ``select`` index, a ``t()`` taken only when a gradient
is square there) was never compared, and the probe trace's program was proved. Fixed in stop
33: :func:`~spec_lang.torch_frontend.analysis.align_sizes` aligns the data movement too (by
what it does: ``clone`` + ``_unsafe_view`` at one size and ``view`` at the other are one
reshape), and :func:`~spec_lang.torch_frontend.real_moves.check_real_moves` refuses a move
that means another thing at the real sizes, and data that moves differently there (compared
by strided layouts where torch spells the moves differently); ``naming.solve_real_sizes``
checks the moves' real shapes.

The unit tests build the two traces with ``make_fx`` at two sizes (seconds); the end-to-end
ones run ``prove --torch`` (30-40 s each: ``slow``).
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from torch.fx.experimental.proxy_tensor import make_fx

from spec_lang.torch_frontend.analysis import align_sizes
from spec_lang.torch_frontend.literals import GraphMismatch, Traces
from spec_lang.torch_frontend.real_moves import check_real_moves

ROUND24 = Path(__file__).resolve().parent / "plans" / "round24"


def _gm(f, *shapes):
    return make_fx(f, tracing_mode="fake")(*[torch.empty(*s) for s in shapes])


def _check(f, probe_shapes, real_shapes, real_of):
    """``check_real_moves`` on ``f`` traced at two sizes; a probe node's real shape is its
    probe shape with every size mapped by ``real_of`` (what its named dims would give)."""
    tr = Traces(_gm(f, *probe_shapes), {}, {}, real=_gm(f, *real_shapes))

    def probe_shape(n, i):
        v = n.meta.get("val")
        v = v[i] if i is not None else v
        return tuple(real_of[int(s)] for s in v.shape) if hasattr(v, "shape") else None
    check_real_moves(tr, "train.py", probe_shape)
    return tr


def _t_when_square(x):
    y = x.t() if x.shape[0] == x.shape[1] else x
    return y * 2.0


def _select_moved(x):
    k = 1 if x.shape[0] == 6 else 0
    return x.select(0, k) * 2.0


def _gqa_expand(x, z):
    return x.expand(x.shape[0], z.shape[0], x.shape[2]).reshape(-1, x.shape[2]) * 2.0


def _gather_shuffle(x, k):
    return _shuffle(x, k, wrong=False)


def _gather_shuffle_wrong(x, k):
    return _shuffle(x, k, wrong=True)


def _shuffle(x, k, wrong):
    """DTensor's all-gather shuffle: ``k`` blocks of dim 0 laid along dim 1; skipped (a view)
    when a block has one row, as at the real sizes of a batch of one per rank."""
    b = x.shape[0] // k.shape[0]
    if b == 1:
        y = x.transpose(0, 1) if wrong else x
        return y.reshape(1, -1, x.shape[2]) * 2.0
    return torch.cat(x.split(b, 0), 1) * 2.0


def _micro_batch(x, k):
    m = x.shape[0] // 4
    return x[2 * m + k.shape[0] - 1:3 * m + k.shape[0] - 1] * 2.0


def test_a_transpose_only_at_the_real_sizes_is_refused():
    with pytest.raises(GraphMismatch, match=r"argument 0 of mul .* takes its entries in another "
                                            "order"):
        _check(_t_when_square, [(5, 7)], [(6, 6)], {5: 6, 7: 6})


def test_a_select_index_that_differs_only_at_the_real_sizes_is_refused():
    with pytest.raises(GraphMismatch, match=r"aten\.select\.int \(select\) takes other entries "
                                            r"at the real sizes \(0, 1\) than at the probe sizes "
                                            r"\(0, 0\)"):
        _check(_select_moved, [(5, 7)], [(6, 8)], {5: 6, 7: 8})


def test_one_reshape_spelled_two_ways_aligns():
    """GQA's ``expand`` + ``reshape``: ``clone`` + ``_unsafe_view [15, 7]`` when the repeat is 3
    (probe), ``view [-1, 8]`` when it is 1 (real)."""
    p, r = _gm(_gqa_expand, (5, 1, 7), (3,)), _gm(_gqa_expand, (6, 1, 8), (1,))
    aligned, loose_p, loose_r = align_sizes(list(p.graph.nodes), list(r.graph.nodes))
    moves = {str(x.target): str(y.target) for x, y in aligned.items() if x.op == "call_function"}
    assert moves == {"aten.expand.default": "aten.expand.default",
                     "aten._unsafe_view.default": "aten.view.default",
                     "aten.mul.Tensor": "aten.mul.Tensor"}
    assert [str(x.target) for x in loose_p] == ["aten.clone.default"] and loose_r == []
    _check(_gqa_expand, [(5, 1, 7), (3,)], [(6, 1, 8), (1,)], {5: 6, 1: 1, 7: 8, 3: 1, 15: 6})


def test_a_shuffle_skipped_at_one_row_per_block_is_the_same_data():
    """llama3_8b_tp8's sequence-parallel all-gather: ``split`` + ``cat`` at the probe sizes, a
    ``view`` at the real sizes (one sequence per rank): equal there, by their strided layouts;
    the same with a transpose at the real sizes is refused."""
    sizes = {12: 4, 5: 8, 7: 16, 4: 4, 3: 1, 20: 32}     # 4 ranks; 3 rows per rank -> 1
    tr = _check(_gather_shuffle, [(12, 5, 7), (4,)], [(4, 8, 16), (4,)], sizes)
    assert {str(x.target) for x in tr.loose_moves[0]} == {"aten.split.Tensor",
                                                         "<built-in function getitem>",
                                                         "aten.cat.default"}
    with pytest.raises(GraphMismatch, match="takes its entries in another order"):
        _check(_gather_shuffle_wrong, [(12, 5, 7), (4,)], [(4, 8, 16), (4,)], sizes)


def test_a_micro_batch_slice_is_read_as_its_block():
    """torch's pipelining slices micro-batch 2 of 4 (``[20:30]`` of 40 at the probe sizes,
    ``[2:3]`` of 4 at the real sizes): the same block; one row later at the real sizes is
    refused."""
    _check(_micro_batch, [(40, 7), (1,)], [(4, 8), (1,)], {40: 4, 7: 8, 1: 1, 10: 1})
    with pytest.raises(GraphMismatch, match=r"slice_1\) takes other entries at the real sizes"):
        _check(_micro_batch, [(40, 7), (1,)], [(4, 8), (2,)], {40: 4, 7: 8, 1: 1, 10: 1})


def test_the_same_moves_align_node_for_node():
    p, r = _gm(_select_moved, (5, 7)), _gm(_select_moved, (4, 8))
    aligned, loose_p, loose_r = align_sizes(list(p.graph.nodes), list(r.graph.nodes))
    assert len(aligned) == len(p.graph.nodes) and loose_p == loose_r == []


# -- end to end (prove --torch, a dp 2 MLP) ------------------------------------------------------

def _prove(name: str, tmp_path: Path) -> dict:
    from tests.adversarial.torch_prove import prove

    return prove(ROUND24 / name, tmp_path)


@pytest.mark.slow
@pytest.mark.parametrize("name,line,what", [
    ("r24_02_transpose_real_only.py", "p.grad.copy_(g.clone())",
     "argument 1 of copy_ (aten.copy_.default) is moved differently at the real sizes"),
    ("r24_03_select_real_only.py", "loss = (model(batch[\"x\"])[:, k] ** 2).mean()",
     "aten.select.int (select_1) takes other entries at the real sizes (1, 1) than at the probe "
     "sizes (1, 0)"),
])
def test_r24_1_data_movement_only_at_the_real_sizes_is_refused(tmp_path, name, line, what):
    """r24_02 was EQUIVALENT on main at 01859fe (4 goals); r24_03 an internal error there."""
    lines = (ROUND24 / name).read_text().splitlines()
    at = next(i for i, text in enumerate(lines, 1) if text.strip() == line)
    out = _prove(name, tmp_path)
    assert out["_rc"] == 3, out
    assert f"{name}:{at}: " in out["_err"] and what in out["_err"], out["_err"]


@pytest.mark.slow
def test_r24_1_right_mirror_is_equivalent(tmp_path):
    out = _prove("r24_00_right.py", tmp_path)
    assert out["_rc"] == 0 and out.get("verdict") == "EQUIVALENT", out


@pytest.mark.slow
def test_select_of_one_entry_of_a_named_dim_is_unknown_not_an_internal_error(tmp_path):
    """``[:, 0]`` of the output (hidden 6 at the real sizes): ``CHUNK(A, |A|_probe, 0)`` would be
    a block of several entries wherever the real size is a multiple of the probe size; at
    01859fe an internal error (exit 3, ``does not divide over ['#0/14']``), UNKNOWN since stop
    33 naming the select."""
    out = _prove("r24_04_select_right_unknown.py", tmp_path)
    assert out["_rc"] == 2 and out.get("verdict") == "UNKNOWN", out
    assert "select of one entry of the named dim" in str(out), out


def _cat_swapped(x):
    a, b = x * 2.0, x * 3.0
    return torch.cat([b, a] if x.shape[0] == 6 else [a, b]) + 1.0


def test_a_cat_of_two_values_in_another_order_at_the_real_sizes_is_refused():
    """``_check_refs`` compares the sets of computing nodes an argument comes from, which a
    ``cat`` with its inputs swapped keeps: the aligned move's inputs are compared as twins."""
    with pytest.raises(GraphMismatch, match=r"argument 0\[0\] of cat .* is another value at the "
                                            "real sizes"):
        _check(_cat_swapped, [(5, 7)], [(6, 8)], {5: 6, 7: 8, 10: 12})
    _check(_cat_swapped, [(5, 7)], [(4, 8)], {5: 4, 7: 8, 10: 8})     # the same order: passes
