"""CASES.md section 7, context-parallel index maps (B33, verl PR #4250).

The load-balanced CP map (rank c holds chunks c and 2cp-1-c of 2cp) is the symbolic
``PERMUTE`` + ``Shard(S)`` of ``spec_lang/cp.py``; next-token targets are ``SHIFT`` in global
order. Shifting after the split pairs chunk-boundary positions with the wrong token.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from proofs.prover import prove
from spec_lang import PlanError, load
from spec_lang.cp import cp_split, load_balanced_order, next_token_labels, shift
from spec_lang.dims import Dim
from spec_lang.evaluate import evaluate
from spec_lang.spec import index
from spec_lang.tensor import Tensor, TraceContext, tracing
from spec_lang.term import Op, term, DimSpec
from tests.bugs.cases import BUGS, assert_certified, assert_refuted


def test_b33_shift_after_split_is_refuted():
    cx = assert_refuted("B33", goal="loss")
    assert {"grad:head", "grad:emb"} <= set(cx.others)


def test_b33_fixed_is_certified(tmp_path):
    assert_certified("B33", tmp_path)


# -- the index map itself, by the evaluator ----------------------------------------------------
def megatron_positions(cp: int, n: int) -> list[list[int]]:
    """Megatron-LM get_batch_on_this_cp_rank, written independently: rank c holds chunks c and
    2cp-1-c of 2cp equal chunks, in that order."""
    k = n // (2 * cp)
    return [list(range(c * k, (c + 1) * k)) + list(range((2 * cp - 1 - c) * k, (2 * cp - c) * k))
            for c in range(cp)]


def _per_rank(cp: int, n: int, build) -> np.ndarray:
    """Evaluate ``build(tokens)`` in a plan trace over Mesh(cp); tokens[i] = 100 + i.
    Returns (cp, local n) values."""
    S = Dim("S", n)
    tok = term(Op.INPUT, (), ("tokens", "data", "index", "V"), (DimSpec("S"),))
    with tracing(TraceContext(kind="plan", sizes={"S": n, "V": 1000}, mesh={"cp": cp})):
        out = build(Tensor(tok, "test:1"), S).term
    binding = {"S": n, "V": 1000, "cp": cp}
    from spec_lang.term import Binding
    v = evaluate([out], Binding(binding), {"tokens": 100.0 + np.arange(n)})[out]
    if "@cp" not in v.axes:
        return np.broadcast_to(v.data, (cp,) + v.data.shape)
    return np.moveaxis(v.data, v.axes.index("@cp"), 0)


@pytest.mark.parametrize("cp,n", [(1, 4), (2, 4), (2, 8), (4, 8), (2, 12), (4, 16)])
def test_cp_split_is_megatrons_load_balanced_map(cp, n):
    got = _per_rank(cp, n, lambda t, S: cp_split(t, S))
    want = np.array([[100 + i for i in pos] for pos in megatron_positions(cp, n)], dtype=float)
    np.testing.assert_array_equal(got, want)


def _wrong_positions(cp: int, n: int) -> set[int]:
    glob = _per_rank(cp, n, lambda t, S: cp_split(next_token_labels(t, S), S))
    local = _per_rank(cp, n, lambda t, S: next_token_labels(cp_split(t, S), S))
    pos = megatron_positions(cp, n)
    return {pos[c][i] for c in range(cp) for i in range(len(pos[c])) if glob[c, i] != local[c, i]}


@pytest.mark.parametrize("cp,n,wrong", [
    (1, 4, set()), (1, 8, set()),         # cp = 1 hides the bug
    (2, 4, {0, 2}),                       # CASES.md: position 0 gets x_3, position 2 loses x_3
    (2, 8, {1, 5}),                       # CASES.md: with 8 tokens, positions 1 and 5
    (4, 8, {0, 1, 2, 4, 5, 6}),           # one token per chunk: every boundary but 3 -> 4 and 7
])
def test_local_shift_is_wrong_exactly_at_chunk_boundaries(cp, n, wrong):
    assert _wrong_positions(cp, n) == wrong


def test_shift_is_next_token_with_zero_fill():
    got = _per_rank(1, 4, lambda t, S: shift(t, S))
    np.testing.assert_array_equal(got[0], [101, 102, 103, 0])


def test_load_balanced_order():
    assert load_balanced_order(1) == (0, 1)
    assert load_balanced_order(2) == (0, 3, 1, 2)
    assert load_balanced_order(4) == (0, 7, 1, 6, 2, 5, 3, 4)


# -- generalised: cp, lengths, through the prover -------------------------------------------------
def _variant(tmp_path: Path, which: str, cp: int, n: int, b: int = 1) -> Path:
    src = (BUGS / f"B33_{which}.py").read_text()
    src = src.replace('Dim("B", 1), Dim("S", 4)', f'Dim("B", {b}), Dim("S", {n})')
    src = src.replace("Mesh(cp=2)", f"Mesh(cp={cp})")
    p = tmp_path / f"B33_{which}_cp{cp}_s{n}.py"
    p.write_text(src)
    return p


@pytest.mark.parametrize("cp,n", [(2, 8), (4, 8), (2, 12)])
def test_b33_generalises_over_cp_and_length(tmp_path, cp, n):
    bad = prove(load(_variant(tmp_path, "buggy", cp, n)), timeout_s=60)
    assert bad.verdict == "NOT EQUIVALENT" and bad.counterexample.goal == "loss"
    good = prove(load(_variant(tmp_path, "fixed", cp, n)), timeout_s=60)
    assert good.verdict == "EQUIVALENT", [(g.name, g.reason) for g in good.open_goals]


def test_b33_cp1_control_hides_the_bug(tmp_path):
    # with one CP rank the local concatenation is the global sequence: no counterexample exists
    r = prove(load(_variant(tmp_path, "buggy", 1, 4)), timeout_s=60)
    assert r.verdict != "NOT EQUIVALENT"


def test_odd_length_must_be_padded(tmp_path):
    with pytest.raises(PlanError, match=r"B33_fixed_cp2_s7\.py:\d+: .*pad S to a multiple of 4"):
        load(_variant(tmp_path, "fixed", 2, 7))


def test_odd_length_padded_with_mask_is_the_unpadded_loss(tmp_path):
    """7 real tokens padded to 8 (cont = 0 at the pad): the CP loss equals the loss of the
    7-token sequence, computed by numpy without CP or padding."""
    prob = load(_variant(tmp_path, "fixed", 2, 8))
    goal = next(g for g in prob.goals if g.name == "loss")
    rng = np.random.default_rng(3)
    emb, head = rng.standard_normal((8, 4)), rng.standard_normal((4, 8))
    toks = np.array([[5, 1, 7, 2, 2, 0, 6, 3]], dtype=float)        # position 7 is padding
    cont = np.array([[0, 1, 1, 0, 1, 1, 1, 0]], dtype=float)        # two packed sequences
    vals = evaluate([goal.actual], prob.binding.replace(V=8),
                    {"emb": emb, "head": head, "tokens": toks, "cont": cont})[goal.actual]
    # reference over the 7 real tokens: sequences [0..2] and [3..6]; targets inside each
    logits = emb[toks[0, :7].astype(int)] @ head
    pairs = [(i, int(toks[0, i + 1])) for i in range(6) if cont[0, i + 1] == 1]
    ce = [np.log(np.exp(logits[i]).sum()) - logits[i, t] for i, t in pairs]
    assert len(pairs) == 5
    np.testing.assert_allclose(np.ravel(vals.data)[0], np.mean(ce), rtol=1e-12)
