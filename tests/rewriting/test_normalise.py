"""The normaliser on real plans: every goal of the debug Llama plans normalises to its spec, and
no mutant goal is proved (a proof must imply numeric equality: false accepts stay 0)."""

from __future__ import annotations

import sys
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest

from rewriting import Normaliser, first_difference, normalise
from rewriting import build as b
from spec_lang.evaluate import evaluate, sample_inputs
from spec_lang.term import Binding, Op, term, walk

from rw_helpers import aligned

PLANS = Path(__file__).resolve().parents[1] / "spec_lang" / "plans"


def _load(path: Path):
    from spec_lang import load

    if not path.exists():
        pytest.skip(f"{path} is not there")
    return load(path)


def _proved(problem) -> dict[str, bool]:
    # self-checks on: every fired rule's lhs(σ) rebuilds the node, its guard holds, dims kept
    n = Normaliser(problem.binding, check=True)
    out = {}
    for g in problem.goals:
        (e, a), _ = normalise([g.expected, g.actual], problem.binding, normaliser=n)
        out[g.name] = e is a
    return out


def _numerically_equal(problem, goal, seed: int = 0) -> bool:
    rng = np.random.default_rng(seed)
    roots = [goal.expected, goal.actual]
    vals = evaluate(roots, problem.binding, sample_inputs(roots, problem.binding, rng), rng=rng)
    x, y = aligned(vals[goal.expected], vals[goal.actual])
    return bool(np.allclose(x, y, rtol=1e-9, atol=1e-9))


EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


@pytest.mark.parametrize("plan", [PLANS / "debug_tp_dp.py", PLANS / "debug_tp_sp.py",
                                  PLANS / "debug_zero1_clip.py",
                                  EXAMPLES / "llama_debug_megatron.py",
                                  EXAMPLES / "llama_debug_megatron_kvrep.py"],
                         ids=lambda p: p.name)
def test_every_goal_of_a_correct_plan_is_proved(plan):
    problem = _load(plan)
    proved = _proved(problem)
    assert proved and all(proved.values()), sorted(k for k, v in proved.items() if not v)


MUTANTS = {
    # name: (plan file, old text, new text); the same list as tests/spec_lang/test_load.py plus ours
    "dp_avg_instead_of_sum": ("debug_tp_dp.py", 'all_reduce(g, DP, "sum")', 'all_reduce(g, DP, "avg")'),
    "copy_to_tp_without_backward_all_reduce": (
        "debug_tp_dp.py", "return copy_to_tp_region(x, TP)",
        'from spec_lang import region; return region(x, "copy_to_tp", "identity", "identity", TP)'),
    "token_count_not_reduced_over_mb": ("debug_tp_dp.py", "all_reduce(all_reduce(ops.sum(mask), "
                                        "DP), MB)", "all_reduce(ops.sum(mask), DP)"),
    "no_dp_grad_reduction": ("debug_tp_dp.py", 'all_reduce(g, DP, "sum")', "g"),
    "sp_norm_grads_not_reduced": ("debug_tp_sp.py", '        return all_reduce(g, TP, "sum")',
                                  "        return g"),
    "sp_head_gather_with_reduce_scatter_backward": (
        "debug_tp_sp.py", "return gather_from_tp_region(x, d.S, TP)",
        "return gather_from_sp_region(x, d.S, TP)"),
}


@pytest.mark.parametrize("name", sorted(MUTANTS))
def test_mutant_goals_are_not_proved(name, tmp_path):
    src, old, new = MUTANTS[name]
    text = (PLANS / src).read_text() if (PLANS / src).exists() else pytest.skip("no plan")
    assert old in text
    p = tmp_path / f"{name}.py"
    p.write_text(text.replace(old, new))
    problem = _load(p)
    proved = _proved(problem)
    wrong = [g for g in problem.goals if not _numerically_equal(problem, g)]
    assert wrong, "the mutant is not numerically wrong anywhere"
    false_accepts = [g.name for g in wrong if proved[g.name]]
    assert not false_accepts, f"{name}: proved numerically different goals {false_accepts}"


def test_first_difference_names_the_subterms():
    bd = Binding({"B": 4, "H": 4, "tp": 2})
    x = b.inp("fx", ["B", "H"])
    a, c = b.unary(Op.EXP, x), b.unary(Op.LOG, x)
    assert first_difference(b.add(a, x), b.add(c, x)) == (a, c)
    assert first_difference(a, a) is None
    del bd


def test_deep_chain_needs_no_recursion():
    """A 5,000-deep chain of ops (each level sharded then lifted) normalises without recursion."""
    bd = Binding({"B": 4, "H": 4, "dp": 2})
    x = b.shard(b.inp("deep", ["B", "H"]), "B", "dp")
    t = x
    for i in range(5000):
        t = b.unary(Op.EXP if i % 2 else Op.TANH, b.add(t, b.const(1)))
    (n,), log = normalise([t], bd)
    assert n.op is Op.SHARD and len(walk(n)) > 5000


# -- Megatron patterns built directly as terms (spec side, plan side) -------------------------
PB = Binding({"B": 4, "S": 4, "H": 8, "V": 16, "tp": 2, "dp": 2, "cp": 2})
tok = b.inp("p_tok", ["B", "S"], "data", "index", "V")
emb = b.inp("p_emb", ["V", "H"])
lg = b.inp("p_logits", ["B", "S", "V"])
hx = b.inp("p_x", ["B", "S", "H"])


def _vocab_parallel_embedding():
    spec = b.einsum([b.one_hot(tok, "V"), emb], ["B", "S", "H"])
    local = b.einsum([b.one_hot(tok, "V", ("tp",)), b.shard(emb, "V", "tp")], ["B", "S", "H"])
    return spec, b.all_reduce(local, "tp")


def _vocab_parallel_logsumexp():
    def lse(m, s):
        return b.add(m, b.unary(Op.LOG, s))
    m = b.reduce_max(lg, ["V"])
    spec = lse(m, b.einsum([b.unary(Op.EXP, b.add(lg, b.neg(m)))], ["B", "S"]))
    ls = b.shard(lg, "V", "tp")
    mp = b.all_reduce(b.reduce_max(ls, ["V"]), "tp", "max")
    sp = b.all_reduce(b.einsum([b.unary(Op.EXP, b.add(ls, b.neg(mp)))], ["B", "S"]), "tp")
    return spec, lse(mp, sp)


def _sequence_parallel_rms():
    def rms(ms):
        return b.pow_(b.add(ms, b.const(Fraction(1, 10**5))), Fraction(-1, 2))
    spec = rms(b.mul(b.const(Fraction(1, 8)), b.einsum([b.mul(hx, hx)], ["B", "S"])))
    xs = b.shard(hx, "H", "tp")
    plan = rms(b.mul(b.recip(term(Op.DIM_SIZE, (), ("H",), ())),
                     b.all_reduce(b.einsum([b.pow_(xs, 2)], ["B", "S"]), "tp")))
    return spec, plan


def _context_parallel_token_mean():
    msk = b.inp("p_mask", ["B", "S"], "data", "mask")
    ce = b.inp("p_ce", ["B", "S"])
    spec = b.mul(b.einsum([msk, ce], []), b.recip(b.einsum([msk], [])))
    num = b.all_reduce(b.all_reduce(b.einsum([b.shard(b.shard(msk, "B", "dp"), "S", "cp"),
                                              b.shard(b.shard(ce, "B", "dp"), "S", "cp")], []),
                                    "cp"), "dp")
    den = b.all_reduce(b.all_reduce(b.einsum([b.shard(b.shard(msk, "B", "dp"), "S", "cp")], []),
                                    "dp"), "cp")
    return spec, b.mul(num, b.recip(den))


PATTERNS = {"vocab_parallel_embedding": _vocab_parallel_embedding,
            "vocab_parallel_logsumexp": _vocab_parallel_logsumexp,
            "sequence_parallel_rms": _sequence_parallel_rms,
            "context_parallel_token_mean": _context_parallel_token_mean}


@pytest.mark.parametrize("name", sorted(PATTERNS))
def test_megatron_pattern_is_proved_and_numerically_equal(name):
    spec, plan = PATTERNS[name]()
    (e, a), _ = normalise([spec, plan], PB)
    assert e is a, first_difference(e, a)
    rng = np.random.default_rng(1)
    vals = evaluate([spec, plan], PB, sample_inputs([spec, plan], PB, rng), rng=rng)
    x, y = aligned(vals[spec], vals[plan])
    np.testing.assert_allclose(x, y, rtol=1e-10)


def _mutant_ids():
    try:
        sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
        from tests.assets.mutants import MUTANTS
    except ImportError:
        return []
    return [m.id for m in MUTANTS]


@pytest.mark.parametrize("mutant_id", _mutant_ids())
def test_mutant_suite_has_no_false_accept(mutant_id):
    """tests/assets/mutants.py: no numerically wrong goal normalises to its spec."""
    from spec_lang import build_problem
    from tests.assets.mutants import MUTANTS, build

    (m,) = [m for m in MUTANTS if m.id == mutant_id]
    problem = build_problem(*build(mutant_id))
    proved = _proved(problem)
    assert not proved[m.goal], f"{mutant_id}: the diverging goal {m.goal} was proved"
    false_accepts = [g.name for g in problem.goals
                     if proved[g.name] and not _numerically_equal(problem, g)]
    assert not false_accepts, false_accepts
