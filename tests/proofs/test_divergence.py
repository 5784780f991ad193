"""Where a refuted goal's divergence starts (``proofs/divergence.py``): the plan node whose value
first differs from the spec's while every value it reads agrees, named by its ``file:line``.

Hand-built terms with recorded sites (names no other test uses: terms are hash-consed and a
site is kept per term, the first one wins); ``tests/torch_frontend/test_examples.py`` checks
the note on the buggy torch examples end to end.
"""

from __future__ import annotations

from fractions import Fraction

from proofs.divergence import Start, divergence_start
from spec_lang.tensor import record_site
from spec_lang.term import Binding, DimSpec, Op, term

B, H = DimSpec("B"), DimSpec("H")
Bdp, Htp = DimSpec("B", ("dp",)), DimSpec("H", ("tp",))
SIZES = Binding({"B": 4, "H": 6, "dp": 2, "tp": 2})
X = term(Op.INPUT, (), ("dv_x", "data", "real"), (B, H))
W = term(Op.INPUT, (), ("dv_w", "param", "real"), (H,))


def _c(v: Fraction | int) -> object:
    return term(Op.CONST, (), (Fraction(v),), ())


def _sited(t, site: str):
    record_site(t, site)
    return t


def _tp_forward():
    """Spec ``tanh(sum_H x * w)``; the plan's row-parallel partial sums over tp."""
    spec = term(Op.TANH, (term(Op.EINSUM, (X, W), (("B",),), (B,)),), (), (B,))
    xs = term(Op.SHARD, (X,), ("H", "tp"), (B, Htp))
    ws = term(Op.SHARD, (W,), ("H", "tp"), (Htp,))
    local = _sited(term(Op.EINSUM, (xs, ws), (("B",),), (B,)), "model.py:12")
    return spec, local


def test_a_scale_in_the_forward_is_named_at_its_line_not_at_the_goals():
    spec, local = _tp_forward()
    reduced = term(Op.ALL_REDUCE, (local,), ("tp", "sum"), (B,))
    assert divergence_start(spec, term(Op.TANH, (reduced,), (), (B,)), SIZES, 0) is None
    hooked = _sited(term(Op.MUL, (_c(3), reduced), (), (B,)), "parallelize.py:41")
    plan = _sited(term(Op.TANH, (hooked,), (), (B,)), "train.py:50")
    got = divergence_start(spec, plan, SIZES, 0)
    assert isinstance(got, Start) and got.plan_site == "parallelize.py:41", got
    assert not got.at_goal
    assert got.plan_has.startswith("a product of") and got.compared >= 4
    assert got.note.startswith("values first differ at parallelize.py:41 (a product of ")
    assert got.note.endswith("; every value it reads agrees with the spec's") and not got.reads


def test_a_mesh_factor_on_the_goal_itself_has_no_start():
    """``2 * all_reduce(partial)`` with tp = 2, or a data-parallel gradient averaged twice:
    the goal's value is the spec's times a mesh size, which the counterexample's factor says
    (no note); the partial sums below are right up to their layout."""
    spec, local = _tp_forward()
    doubled = _sited(term(Op.MUL, (_c(2), term(Op.ALL_REDUCE, (local,), ("tp", "sum"), (B,))),
                          (), (B,)), "train.py:47")
    assert divergence_start(spec.args[0], doubled, SIZES, 0) is None
    grad = term(Op.EINSUM, (X,), (("H",),), (H,))
    xs = term(Op.SHARD, (X,), ("B", "dp"), (Bdp, H))
    local = _sited(term(Op.EINSUM, (xs,), (("H",),), (H,)), "loss.py:3")
    right = term(Op.ALL_REDUCE, (local,), ("dp", "sum"), (H,))
    assert divergence_start(grad, right, SIZES, 1) is None      # no divergence
    wrong = _sited(term(Op.MUL, (_c(Fraction(1, 2)), right), (), (H,)), "ddp.py:9")
    assert divergence_start(grad, wrong, SIZES, 1) is None


def test_a_missing_all_reduce_is_named_where_the_partial_sums_are_read():
    spec, local = _tp_forward()
    plan = _sited(term(Op.TANH, (local,), (), (B,)), "train.py:50")
    got = divergence_start(spec, plan, SIZES, 0)
    assert got is not None and got.plan_site == "train.py:50" and got.at_goal, got
    nested = _sited(term(Op.EXP, (plan,), (), (B,)), "train.py:51")
    got = divergence_start(term(Op.EXP, (spec,), (), (B,)), nested, SIZES, 0)
    assert got is not None and (got.plan_site, got.at_goal) == ("train.py:50", False), got
    assert got.reads == ("model.py:12 (a product summed over H): summed over tp it is the "
                         "spec's value, a Partial value"), got.reads
    assert got.note == ("values first differ at train.py:50 (a tanh); it reads " + got.reads)


def test_a_different_operation_is_named_where_the_structures_part():
    spec, local = _tp_forward()
    reduced = term(Op.ALL_REDUCE, (local,), ("tp", "sum"), (B,))
    plan = _sited(term(Op.SIGMOID, (reduced,), (), (B,)), "model.py:20")
    got = divergence_start(spec, plan, SIZES, 0)
    assert got is not None and (got.plan_site, got.plan_has) == ("model.py:20", "a sigmoid")
    assert got.how == "the spec has a tanh; the plan has a sigmoid", got.how
    assert got.note == ("values first differ at model.py:20 (a sigmoid); the spec has a tanh; "
                        "the plan has a sigmoid; every value it reads agrees with the spec's")


def test_a_sign_placed_elsewhere_is_looked_through():
    """The spec's ``-sum(x * w)`` against the plan's ``sum(-(3 x) * w)`` (a cross-entropy under
    ``loss_parallel`` negates inside the sum): the walk passes the signs and finds the 3."""
    spec = term(Op.NEG, (term(Op.EINSUM, (X, W), (("B",),), (B,)),), (), (B,))
    tripled = _sited(term(Op.MUL, (_c(3), X), (), (B, H)), "hook.py:5")
    plan = term(Op.EINSUM, (term(Op.NEG, (tripled,), (), (B, H)), W), (("B",),), (B,))
    got = divergence_start(spec, plan, SIZES, 0)
    assert got is not None and got.plan_site == "hook.py:5", got


def test_it_never_raises():
    spec, _ = _tp_forward()
    assert divergence_start(spec, spec, Binding({}), 0) is None       # sizes missing
    assert divergence_start(spec, None, SIZES, 0) is None             # not a term
