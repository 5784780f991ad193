"""``prove --jobs N`` / ``--executor``: obligations normalised on worker processes give the same
verdicts and goal statuses as in-process, their merged certificates are accepted by the checker
(a tampered one is not), and a worker that fails or exceeds its memory never proves a goal."""

import json
import re
import sys
from pathlib import Path

import pytest

import proofs.executor as X
import spec_lang
from proofs.certificate import certificate_of, write_certificate
from proofs.checker import check_certificate
from proofs.cli import prove_main
from proofs.errors import CertificateError
from proofs.prover import prove

from spec_lang.term import Op
from terms import SIZES, einsum, inp, problem, row_parallel, unary

ROOT = Path(__file__).resolve().parents[2]
TINY = ROOT / "tests" / "proofs" / "plans" / "tiny_dp_tp.py"
PLANS = {p: ROOT / "examples" / p for p in
         ("llama_debug_megatron.py", "llama_debug_3d.py", "bugs/B01_buggy.py")}
_LOADED: dict[str, object] = {}


def _load(name):
    if name not in _LOADED:
        _LOADED[name] = spec_lang.load(PLANS[name])
    return _LOADED[name]


@pytest.fixture
def force_pool(monkeypatch):
    """Send even a small, fully shared problem to the pool, its goals dealt over the tasks
    (the hard case for the merge: the workers' node and step tables overlap)."""
    monkeypatch.setattr(X, "POOL_MIN_NODES", 0)
    monkeypatch.setattr(X, "SPLIT_COMPONENTS", True)


_PROVED: dict[tuple[str, int], object] = {}


def _prove(name, jobs):
    """``prove`` of an example with ``jobs`` workers (pool forced), cached for this module."""
    if (name, jobs) not in _PROVED:
        with pytest.MonkeyPatch.context() as m:
            m.setattr(X, "POOL_MIN_NODES", 0)
            m.setattr(X, "SPLIT_COMPONENTS", True)
            _PROVED[(name, jobs)] = prove(_load(name), jobs=jobs)
    return _PROVED[(name, jobs)]


def _statuses(r):
    return {g.name: (g.status, g.method if g.status == "proved" else None) for g in r.goals}


def _checked(r, path):
    write_certificate(path, certificate_of(r))
    return check_certificate(path, retrace=False)


# -- partition ------------------------------------------------------------------------------------
def test_partition_keeps_goals_sharing_a_subterm_together_and_separates_independent_ones():
    items = []
    for i in range(4):
        spec, plan = row_parallel(f"x{i}", f"layers.{i}.w")
        items.append((f"g{i}", spec, plan))
    tasks, info = X.partition(items, 2)
    assert info["components"] == 4 and len(tasks) == 4
    assert sorted(k for t in tasks for k in t) == [0, 1, 2, 3]
    # a fifth goal built on goal 0's plan term shares a tall subterm with it: same task
    deep = unary(Op.EXP, items[0][2])
    items.append(("g4", unary(Op.EXP, items[0][1]), deep))
    tasks, info = X.partition(items, 2)
    assert info["components"] == 4
    assert next(t for t in tasks if 0 in t) == [0, 4]
    # goals sharing only leaves (inputs) are independent
    w = inp("w", "F", "H")
    a = einsum(("B", "H"), inp("a", "B", "F"), w)
    b = einsum(("B", "H"), inp("b", "B", "F"), w)
    tasks, info = X.partition([("a", a, a), ("b", b, b)], 2)
    assert info["components"] == 2


def test_flat_wire_format_round_trips_to_the_same_interned_terms():
    spec, plan = row_parallel()
    rows, roots = X.flatten([spec, plan])
    import pickle

    back = X.unflatten(pickle.loads(pickle.dumps(rows)))
    assert back[roots[0]] is spec and back[roots[1]] is plan


def test_small_problems_stay_in_process():
    spec, plan = row_parallel()
    r = prove(problem([("loss", "loss", spec, plan)], SIZES), jobs=2)
    assert r.verdict == "EQUIVALENT" and r.executor["executor"] == "in-process"


# -- the same plans with jobs=1 and jobs=2 --------------------------------------------------------
@pytest.mark.parametrize("name", list(PLANS))
def test_jobs_2_gives_the_same_verdict_goal_statuses_and_an_accepted_certificate(
        name, tmp_path):
    one, two = _prove(name, 1), _prove(name, 2)
    assert two.verdict == one.verdict
    assert _statuses(two) == _statuses(one)
    if one.verdict == "EQUIVALENT":
        assert two.executor["executor"] == "local" and two.executor["tasks"] >= 2
        assert two.executor["failed_tasks"] == 0
        # the in-process certificate's acceptance is the other suites' business
        c2 = _checked(two, tmp_path / "two.json")
        assert (c2.verdict, c2.total, c2.checked) == ("EQUIVALENT", len(one.goals),
                                                     len(one.goals))
    else:
        assert one.verdict == "NOT EQUIVALENT"
        assert two.counterexample.goal == one.counterexample.goal
        assert _checked(two, tmp_path / "two.json").verdict == "NOT EQUIVALENT"


def test_a_tampered_jobs_2_certificate_is_rejected(tmp_path):
    r = _prove("llama_debug_megatron.py", 2)
    assert r.verdict == "EQUIVALENT" and r.executor["tasks"] >= 2
    cert = certificate_of(r)
    # point one rule step's result at another node of the same table
    k = next(i for i, s in enumerate(cert["steps"]) if s["kind"] == "rule")
    s = cert["steps"][k]
    s["rhs"] = next(i for i in range(len(cert["nodes"])) if i not in (s["lhs"], s["rhs"])
                    and cert["nodes"][i][3] == cert["nodes"][s["rhs"]][3])
    path = tmp_path / "bad.json"
    write_certificate(path, cert)
    with pytest.raises(CertificateError):
        check_certificate(path, retrace=False)


# -- failures leave goals open --------------------------------------------------------------------
def test_a_worker_memory_limit_too_small_leaves_goals_open_never_proved(force_pool):
    r = prove(_load("llama_debug_megatron.py"), jobs=2, worker_memory_gb=0.002)
    assert r.verdict == "UNKNOWN"
    assert r.counts["rewrite"] == 0 and r.counts["open"] == len(r.goals)
    assert all("memory" in g.reason or "worker" in g.reason for g in r.goals), \
        {g.reason for g in r.goals}


def test_a_deadline_before_the_workers_finish_leaves_goals_open(force_pool):
    p = _load("llama_debug_megatron.py")
    items = [(g.name, g.expected, g.actual) for g in p.goals]
    from proofs.certificate import ProofSteps
    from proofs.kernel import NodeTable, from_terms

    table, steps, ids = NodeTable(), ProofSteps(), {}
    node = lambda t: from_terms(table, [t], ids)[id(t)]  # noqa: E731
    import time

    res = X.normalise_goals_parallel(items, p.binding, steps, table, node, jobs=2,
                                     progress=lambda *_: None, deadline=time.monotonic() + 0.01)
    assert not res.chains and set(res.failed) == {n for n, _, _ in items}
    assert set(res.failed.values()) == {"timeout"}


# -- CLI ------------------------------------------------------------------------------------------
def test_executor_ray_without_ray_is_a_one_line_error_exit_3(capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` raises ImportError
    code = prove_main([str(TINY), "--executor", "ray"])
    out, err = capsys.readouterr()
    assert code == 3 and out == ""
    assert err.count("\n") == 1 and err.startswith("prove: error: --executor ray needs")
    assert "pip install 'shardproof[ray]'" in err


def test_progress_lines_on_a_non_terminal_and_none_with_json(capsys):
    assert prove_main([str(TINY), "--jobs", "2"]) == 0
    out, err = capsys.readouterr()
    lines = err.splitlines()
    assert lines[0].startswith("prove: trace: 1/1 plan, ")
    phases = [ln.split(":")[1].strip() for ln in lines]
    assert "rewrite" in phases and len(phases) == len(set(phases))  # one line per phase
    # done/total in the unit the phase counted; phases without counts only when >= 1 s
    # (proofs/progress.py, docs/cli.md "Progress")
    assert all(re.fullmatch(r"prove: \w+: ((\d+)/\2 (goals|lemmas|plan), )?\d+\.\d s", ln)
               for ln in lines), err
    assert all(float(ln.rsplit(" ", 2)[-2]) >= 1.0 for ln in lines if "/" not in ln), err
    assert prove_main([str(TINY), "--json"]) == 0
    out, err = capsys.readouterr()
    assert json.loads(out)["counts"]["total"] == 5
    assert "prove: " not in err


def test_summary_shows_extra_counts_and_the_executor():
    import io

    from proofs.cli import _summary

    class R:
        counts = {"total": 4, "rewrite": 1, "smt": 0, "reused": 2, "open": 0, "refuted": 0,
                  "cut": 1}
        open_goals = []
        seconds = {"load": 1.0, "rewrite": 2.0}
        lemma_counts: dict = {}     # the fields of proofs.prover.Report that _summary reads
        executor = {"executor": "local", "workers": 2, "tasks": 3, "components": 3,
                    "worker_peak_rss_mb": 120.0, "worker_memory_gb": 4.0, "failed_tasks": 0,
                    "seconds": {"merge": 0.5}}
    buf = io.StringIO()
    _summary(R(), buf)
    lines = buf.getvalue().splitlines()
    assert lines[0].split() == ["goals", "rewriting", "z3", "reused", "open", "refuted", "cut"]
    assert lines[1].split() == ["4", "1", "0", "2", "0", "0", "1"]
    assert "executor: local, 2 workers, 3 tasks" in buf.getvalue()


# -- ray ------------------------------------------------------------------------------------------
@pytest.mark.ray
@pytest.mark.slow
def test_ray_local_instance_gives_the_same_statuses_and_an_accepted_certificate(
        tmp_path, force_pool):
    pytest.importorskip("ray")
    p = _load("llama_debug_megatron.py")
    one = _prove("llama_debug_megatron.py", 1)
    r = prove(p, jobs=2, executor="ray")
    assert r.executor["executor"] == "ray" and r.executor["failed_tasks"] == 0
    assert r.verdict == one.verdict == "EQUIVALENT" and _statuses(r) == _statuses(one)
    assert _checked(r, tmp_path / "ray.json").verdict == "EQUIVALENT"
