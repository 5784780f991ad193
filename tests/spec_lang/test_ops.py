"""Trace-time checks of the ops: errors name the user's file:line, dims and placements."""

from __future__ import annotations

from fractions import Fraction

import pytest
import sympy

from sl_helpers import inp, traced
from spec_lang import ops
from spec_lang.dims import Dim
from spec_lang.errors import PlanError, SpecError
from spec_lang.tensor import Tensor, TraceContext, tracing
from spec_lang.term import DimSpec, Op, term

B, S, H, F = Dim("B", 4), Dim("S", 6), Dim("H", 8), Dim("F", 12)
HERE = r"test_ops\.py:\d+"


def test_calling_ops_builds_shared_terms_and_records_the_users_line() -> None:
    def build():
        x, w = inp("x", B, H), inp("w", H, F)
        return ops.einsum(x, w, out=(B, F)), ops.einsum(x, w, out=(B, F))

    (a, b), ctx = traced(build)
    assert a.term is b.term  # hash-consed
    assert a.term.op is Op.EINSUM and a.dims == ("B", "F")
    assert a.site.endswith(f"test_ops.py:{build.__code__.co_firstlineno + 2}")
    assert ctx.sizes == {"B": 4, "F": 12}  # every Dim an op sees records its size


def test_einsum_output_dim_missing_names_operands() -> None:
    with pytest.raises(SpecError, match=HERE + r": einsum out dims \['F'\] occur in no operand "
                                                r"\(x \(B, H\)\)"):
        traced(lambda: ops.einsum(inp("x", B, H), out=(B, F)))


def test_elementwise_placement_mismatch_says_what_to_change() -> None:
    def build():
        x = inp("x", B, F)
        xs = Tensor(term(Op.SHARD, (x.term,), ("F", "tp"), (DimSpec("B"), DimSpec("F", ("tp",)))),
                    name="x_local")
        return xs + x

    with pytest.raises(SpecError, match=HERE + r": add: dim F is placed as F\[tp\] in x_local "
                                                r"\(B, F\[tp\]\) but as F in x \(B, F\).*all_gather"):
        traced(build)


def test_plan_trace_raises_plan_errors() -> None:
    ctx = TraceContext("plan", mesh={"tp": 2})
    with tracing(ctx), pytest.raises(PlanError, match=HERE + ": einsum out"):
        ops.einsum(inp("x", B, H), out=(F,))


@pytest.mark.parametrize(("value", "expected"), [
    (3, Fraction(3)), (Fraction(1, 3), Fraction(1, 3)), (1e-5, Fraction(1, 100000)),
    (0.9, Fraction(9, 10)), (3e-4, Fraction(3, 10000)), (sympy.Rational(2, 7), Fraction(2, 7)),
    (1 / sympy.sqrt(128), 1 / sympy.sqrt(128)),
])
def test_constants_are_exact(value, expected) -> None:
    c = ops.const(value)
    assert c.term.op is Op.CONST and c.term.attrs == (expected,)
    assert not isinstance(c.term.attrs[0], float)


@pytest.mark.parametrize("value", [0.1 + 0.2, float("nan"), float("inf"), True, "1",
                                   sympy.Float(0.5), sympy.Symbol("x")])
def test_lossy_or_non_numbers_are_rejected(value) -> None:
    with pytest.raises(SpecError, match=HERE):
        ops.const(value)


def test_pow_needs_a_rational_exponent() -> None:
    with pytest.raises(SpecError, match="exponent"):
        traced(lambda: inp("x", B) ** sympy.sqrt(2))


def test_transpose_is_a_no_op_and_checks_dims() -> None:
    (x, y), _ = traced(lambda: (inp("x", B, H), ops.transpose(inp("x", B, H), H, B)))
    assert y.term is x.term
    with pytest.raises(SpecError, match="give each dim exactly once"):
        traced(lambda: ops.transpose(inp("x", B, H), H))


def test_chunk_checks_divisibility_and_concat_checks_block_order() -> None:
    def bad_chunk():
        x = inp("x", B, S)
        ops.sum(x, S)  # records S's size in the trace
        return ops.chunk(x, S, 4, 0)

    with pytest.raises(SpecError, match=HERE + r": chunk of x \(B, S\): dim S \(local size 6\) "
                                               "does not split into 4 equal blocks"):
        traced(bad_chunk)

    def swapped():
        x = inp("x", B, S)
        a, b = ops.chunks(x, S, 2)
        return ops.concat([b, a], S)

    with pytest.raises(SpecError, match=r"block 0 is S\[#1/2\], expected S\[...#0/2\]"):
        traced(swapped)
    (pair, _ctx) = traced(lambda: (inp("x", B, S), ops.concat(ops.chunks(inp("x", B, S), S, 2), S)))
    assert pair[1].term.dims == pair[0].term.dims


def test_dims_with_one_name_must_agree_on_size() -> None:
    with pytest.raises(SpecError, match="dim H is used with size 9 here but with size 8"):
        traced(lambda: (ops.sum(inp("x", B, H), H), ops.sum(inp("x", B, H), Dim("H", 9))))


def test_tensor_as_bool_is_an_error() -> None:
    with pytest.raises(SpecError, match="used as a Python bool"):
        traced(lambda: bool(inp("x", B)))


def test_softmax_uses_a_stopped_max_and_a_multiplicative_mask() -> None:
    T = Dim("T", 6)
    (p, _ctx) = traced(lambda: ops.softmax(inp("s", S, T), T, mask=ops.causal_mask(S, T)))
    from spec_lang.term import walk  # noqa: PLC0415

    opset = {n.op for n in walk(p.term)}
    assert {Op.STOP_GRAD, Op.REDUCE_MAX, Op.CAUSAL_MASK, Op.EXP} <= opset
    assert Op.WHERE not in opset and Op.MAXIMUM not in opset


def test_dim_rejects_bad_names_and_sizes() -> None:
    for bad in [("mb", 2), ("1x", 2), ("H", 0), ("H", 2.0)]:
        with pytest.raises(SpecError):
            Dim(*bad)
    assert Dim("HD", 128).half() == Dim("HD_half", 64)
    with pytest.raises(SpecError, match="odd"):
        Dim("HD", 5).half()


def test_a_dead_term_leaves_the_intern_table_and_a_live_one_is_shared():
    """``term`` hash-conses through weak references (``spec_lang/term.py`` ``_INTERN``): equal
    fields give the same live object; once it is gone its entry goes too, and building it
    again makes a new term (a new uid)."""
    import gc

    from spec_lang import term as term_mod
    from spec_lang.term import DimSpec, Op, term

    x = term(Op.INPUT, (), ("intern_probe", "param", "real"), (DimSpec("B"),))
    y = term(Op.EXP, (x,), (), (DimSpec("B"),))
    assert term(Op.EXP, [x], [], [DimSpec("B")]) is y
    key, uid = y._key, y.uid
    assert term_mod._INTERN[key]() is y
    del y
    gc.collect()
    assert key not in term_mod._INTERN
    z = term(Op.EXP, (x,), (), (DimSpec("B"),))
    assert z.uid != uid and term_mod._INTERN[key]() is z
