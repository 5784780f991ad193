"""Footguns (issue 12, item 5): ``ops.einsum`` summing a dim out of one operand alone needs
``sum_single``; ``PartialSumWarning``s are grouped per site with a count, at the user's line,
earliest in dataflow first."""

import warnings
from pathlib import Path

import numpy as np
import pytest

from spec_lang import load
from spec_lang.errors import SpecLangError
from spec_lang.evaluate import evaluate
from spec_lang.partial import PartialSumWarning
from spec_lang.term import Binding, DimSpec, Op, term

ROOT = Path(__file__).resolve().parents[2]
TINY = (ROOT / "tests" / "proofs" / "plans" / "tiny_dp_tp.py").read_text()
SPEC_EINSUM = 'h = ops.silu(ops.einsum(enter(d["x"]), p["w1"], out=(B, F)))'


def _line(text: str, needle: str) -> int:
    return next(i for i, x in enumerate(text.splitlines(), 1) if needle in x)


def test_einsum_summing_a_dim_of_one_operand_names_the_line_and_the_dim(tmp_path):
    assert SPEC_EINSUM in TINY
    text = TINY.replace(SPEC_EINSUM, SPEC_EINSUM.replace("out=(B, F)", "out=(B,)"))
    p = tmp_path / "typo.py"
    p.write_text(text)
    with pytest.raises(SpecLangError) as ei:
        load(p)
    msg = str(ei.value)
    assert msg.startswith(f"{p}:{_line(text, 'out=(B,)')}: einsum sums out dim F, which occurs "
                          f"only in w1 (H, F)"), msg
    assert "sum_single=('F',)" in msg and "\n" not in msg


def test_sum_single_opts_in_and_must_name_such_a_dim(tmp_path):
    opted = TINY.replace(SPEC_EINSUM, 'h = ops.silu(ops.einsum(enter(d["x"]), p["w1"], '
                                      'out=(B,), sum_single=(F,)))')
    # the same opt-in in the plan (model() is shared); then w2 sums F alone too: opt in as well
    opted = opted.replace("y = exit_(ops.einsum(h, p[\"w2\"], out=(B, H)))",
                          "y = exit_(ops.einsum(h, p[\"w2\"], out=(B, H), sum_single=(F,)))")
    (tmp_path / "opted.py").write_text(opted)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PartialSumWarning)
        assert load(tmp_path / "opted.py").goals
    wrong = TINY.replace(SPEC_EINSUM, SPEC_EINSUM.replace("out=(B, F)",
                                                          "out=(B, F), sum_single=(H,)"))
    (tmp_path / "wrong.py").write_text(wrong)
    with pytest.raises(SpecLangError, match=r"sum_single names \['H'\], but only dims summed "
                                            r"out of exactly one operand belong there"):
        load(tmp_path / "wrong.py")


def test_a_one_operand_sum_is_what_sum_single_means():
    """``einsum(x, w, out=(B,), sum_single=(F,))`` = sum_H x[b,h] * (sum_F w[h,f]), in float64."""
    from spec_lang import Dim, ops
    from spec_lang.tensor import Tensor

    B, H, F = Dim("B", 3), Dim("H", 4), Dim("F", 5)

    def inp(name, *ds):
        return Tensor(term(Op.INPUT, (), (name, "data", "real"),
                           tuple(DimSpec(d.name) for d in ds)), "test:0")

    x, w = inp("x", B, H), inp("w", H, F)
    y = ops.einsum(x, w, out=(B,), sum_single=(F,))
    rng = np.random.default_rng(0)
    xv, wv = rng.standard_normal((3, 4)), rng.standard_normal((4, 5))
    got = evaluate(y.term, Binding({"B": 3, "H": 4, "F": 5}), {"x": xv, "w": wv})[y.term]
    assert got.axes == ("B",)
    np.testing.assert_allclose(got.data, xv @ wv.sum(axis=1), rtol=0, atol=1e-12)


GROUPED = TINY.replace(
    '''def forward(p, d):
    loss = model(p, d, lambda x: copy_to_tp_region(x, TP), lambda y: reduce_from_tp_region(y, TP))''',
    '''def forward(p, d):
    h = ops.silu(ops.einsum(copy_to_tp_region(d["x"], TP), p["w1"], out=(B, F)))
    z = ops.einsum(h, p["w2"], out=(B, H)) + 1        # BUG: 1 joins every rank's addend
    acc = 0
    for _ in range(3):
        acc = acc + reduce_from_tp_region(ops.exp(z), TP)   # and exp of a pending sum, 3 times
    loss = ops.sum(acc * acc) / ops.dim_size(B)''')


def test_partial_sum_warnings_are_grouped_per_site_bug_first(tmp_path):
    assert GROUPED != TINY
    p = tmp_path / "grouped.py"
    p.write_text(GROUPED)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        load(p)
    ws = [w for w in caught if issubclass(w.category, PartialSumWarning)]
    add, exp = _line(GROUPED, "# BUG"), _line(GROUPED, "exp of a pending sum")
    # one warning per site, at the user's line (not spec_lang/collectives.py), the ADD first
    assert [(w.filename, w.lineno) for w in ws] == [(str(p), add), (str(p), exp)], \
        [(w.filename, w.lineno, str(w.message)[:80]) for w in ws]
    assert str(ws[0].message).startswith(f"{p}:{add}: ADD of a value replicated over tp")
    assert str(ws[1].message).startswith(f"{p}:{exp}: EXP")
    assert all(str(w.message).endswith("[3 times]") for w in ws), [str(w.message) for w in ws]
