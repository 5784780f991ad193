"""The normaliser on real plans: every goal of the debug Llama plans normalises to its spec, and
no mutant goal is proved (a proof must imply numeric equality: false accepts stay 0)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from rewriting import Normaliser, first_difference, normalise
from rewriting import build as b
from spec_lang.evaluate import evaluate, sample_inputs
from spec_lang.term import Binding, Op, walk

from rw_helpers import aligned

PLANS = Path(__file__).resolve().parents[1] / "spec_lang" / "plans"


def _load(path: Path):
    from spec_lang import load

    if not path.exists():
        pytest.skip(f"{path} is not there")
    return load(path)


def _proved(problem) -> dict[str, bool]:
    n = Normaliser(problem.binding)
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


@pytest.mark.parametrize("plan", ["debug_tp_dp.py", "debug_tp_sp.py", "debug_zero1_clip.py"])
def test_every_goal_of_a_correct_plan_is_proved(plan):
    problem = _load(PLANS / plan)
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
