"""``spec_lang.torch_frontend.real_ranks.check_real_ranks`` (adversarial finding R4-7): every
other rank's trace at the real sizes must differ from the zero coordinate's exactly where its
probe-size trace does. Graphs are ``make_fx`` traces of small functions (CPU, in process)."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from torch.fx.experimental.proxy_tensor import make_fx  # noqa: E402

from spec_lang.torch_frontend.literals import GraphMismatch  # noqa: E402
from spec_lang.torch_frontend.real_ranks import check_real_ranks  # noqa: E402


def _trace(rank: int, n: int, wrong_at: int | None = None, offset_wrong: bool = False):
    """A rank's step on a batch of ``n`` rows: its block of ``w`` (rows ``rank * n/2`` on) times
    ``x``, scaled by 2 when ``n == wrong_at`` and ``rank == 1``."""
    half = n // 2

    def step(x, w):
        lo = rank * half if not (offset_wrong and n == wrong_at) else 0
        y = w.narrow(0, lo, half) * x
        scale = 2.0 if (wrong_at == n and rank == 1 and not offset_wrong) else 1.0
        return y.mul(scale).sum()

    return make_fx(step)(torch.ones(half, 3), torch.ones(n, 3))


def test_ranks_that_agree_at_both_sizes_pass():
    check_real_ranks("t.py", _trace(0, 10), _trace(0, 8),
                     [({"dp": 1}, _trace(1, 10), _trace(1, 8))])


def test_a_literal_that_differs_by_rank_only_at_the_real_sizes_is_refused():
    with pytest.raises(GraphMismatch, match=r"rank \{'dp': 1\} at the real sizes: argument 1 "
                                            r"of node mul_1 .* is 1\.0 on the zero coordinate "
                                            r"and 2\.0 on this rank"):
        check_real_ranks("t.py", _trace(0, 10), _trace(0, 8),
                         [({"dp": 1}, _trace(1, 10, wrong_at=8), _trace(1, 8, wrong_at=8))])


def test_a_rank_dependent_offset_that_stops_depending_on_the_rank_is_refused():
    # rank 1 reads rows 0.. at the real sizes (its offset is rank-dependent at probe sizes)
    with pytest.raises(GraphMismatch, match="at the real sizes"):
        check_real_ranks("t.py", _trace(0, 10), _trace(0, 8),
                         [({"dp": 1}, _trace(1, 10, 8, True), _trace(1, 8, 8, True))])


def test_other_ops_at_the_real_sizes_are_refused():
    def extra(x, w):
        return (w.narrow(0, 4, 4) * x).exp().sum()

    other = make_fx(extra)(torch.ones(4, 3), torch.ones(8, 3))
    with pytest.raises(GraphMismatch, match="runs another program at the real sizes"):
        check_real_ranks("t.py", _trace(0, 10), _trace(0, 8),
                         [({"dp": 1}, _trace(1, 10), other)])


def test_other_process_groups_at_the_real_sizes_are_refused():
    with pytest.raises(GraphMismatch, match="other process groups"):
        check_real_ranks("t.py", _trace(0, 10), _trace(0, 8),
                         [({"dp": 1}, _trace(1, 10), _trace(1, 8))],
                         [({"dp": "g1"}, {"dp": "g2"})])


def test_a_constant_built_from_the_rank_at_the_real_sizes_is_refused():
    def with_const(k):
        def step(x):
            return (x * torch.tensor([float(k)])).sum()
        return make_fx(step)(torch.ones(3))

    with pytest.raises(GraphMismatch, match="captured constant"):
        check_real_ranks("t.py", with_const(1), with_const(1),
                         [({"dp": 1}, with_const(1), with_const(5))])


def test_rank_values_real_fits_every_traced_rank():
    """R32b-4: a block offset ``r * n`` must be ``r * n_real`` on every rank traced at real
    sizes, not only on the main rank; unknown real values (no counterpart node) do not fit."""
    from fractions import Fraction

    from spec_lang.torch_frontend.literals import RankValues

    probe = {0: 0, 1: 5}
    ok = RankValues("tp", probe, (Fraction(0), Fraction(5)), 0, {0: 0, 1: 4})
    off_by_one = RankValues("tp", probe, (Fraction(0), Fraction(5)), 0, {0: 0, 1: 5})
    untraced = RankValues("tp", probe, (Fraction(0), Fraction(5)), 0, None)
    unknown = RankValues("tp", probe, (Fraction(0), Fraction(5)), 0, {})
    assert ok.real_fits(lambda r: 4 * r)
    assert not off_by_one.real_fits(lambda r: 4 * r)
    assert untraced.real_fits(lambda r: 4 * r)
    assert not unknown.real_fits(lambda r: 4 * r)
    rank = RankValues("dp", {0: 0, 1: 1}, (Fraction(0), Fraction(1)), 0, {0: 0, 1: 1})
    assert rank.is_the_rank()
    assert not RankValues("dp", {0: 0, 1: 1}, (Fraction(0), Fraction(1)), 0,
                          {0: 0, 1: 0}).is_the_rank()


def _sited(gm, line: int):
    """``gm``'s call nodes, each with a stack trace at ``/u/train.py:line``."""
    nodes = [n for n in gm.graph.nodes if n.op == "call_function"]
    for n in nodes:
        n.meta["stack_trace"] = f'  File "/u/train.py", line {line}, in step\n    y = f(x)\n'
    return nodes


def test_an_op_that_differs_at_the_real_sizes_names_both_ops_and_the_users_line():
    # stop 54's new user: DTensor picked another redistribution at the real sizes, reported at
    # "train.py:1" with node counts only
    from spec_lang.torch_frontend.literals import _check_same
    main = _sited(make_fx(lambda x: (x * 2).sum())(torch.ones(3)), 7)
    real = _sited(make_fx(lambda x: (x + 2).sum())(torch.ones(3)), 9)
    with pytest.raises(GraphMismatch) as e:
        _check_same(main, real, "real sizes", "/u/train.py")
    assert e.value.site == "/u/train.py:7"
    assert str(e.value).startswith("the trace at real sizes runs aten.add.Tensor (/u/train.py:9) "
                                   "where the main trace runs aten.mul.Tensor (/u/train.py:7)")
    assert "input_layouts" in str(e.value)
    longer = _sited(make_fx(lambda x: (x * 2).sum().neg())(torch.ones(3)), 8)
    with pytest.raises(GraphMismatch) as e:
        _check_same(main, longer, "rank {'dp': 1}", "/u/train.py")
    assert e.value.site == "/u/train.py:8"
    assert str(e.value) == ("the graph at rank {'dp': 1} has 3 nodes, the main trace 2 (the first "
                            "extra: aten.neg.default, /u/train.py:8): the program's ops depend on "
                            "the sizes or the rank")
    del main[0].meta["stack_trace"]          # no user frame: no site, the message still says why
    with pytest.raises(GraphMismatch) as e:
        _check_same(main, real, "real sizes")
    assert e.value.site is None and "<graph node mul>" in str(e.value)
