"""The data form of a Problem (``proofs/problem_data.py``): what a traced plan sends back.

The round trip keeps every term (Merkle hashes), the binding, the mesh order, cut points,
dropout records and the schedule as the counterexample report reads it; the prover decides the
same on the rebuilt problem; and the parser rejects every malformed document with one line.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

import spec_lang
from proofs.counterexample import schedule_context
from proofs.kernel import NodeTable, from_terms, node_hash_table
from proofs.problem_data import (
    AccumulationRecord, PipelineRecord, ProblemDataError, parse_problem_data, problem_to_data,
    to_problem,
)

ROOT = Path(__file__).resolve().parents[2]
PLANS = {
    "tiny": ROOT / "tests" / "proofs" / "plans" / "tiny_dp_tp.py",
    "pipeline": ROOT / "examples" / "llama_debug_pp.py",
    "accumulation": ROOT / "examples" / "bugs" / "B19_buggy.py",
    "dropout": ROOT / "examples" / "bugs" / "B35_fixed.py",
    "dropout-pp": ROOT / "tests" / "bugs" / "plans_adv1" / "pp_dropout_min_adv1.py",
}


def _round_trip(problem):
    doc = json.loads(json.dumps(problem_to_data(problem)))
    return doc, to_problem(parse_problem_data(doc), problem.path, problem.source_sha256)


def _hashes(terms):
    t = NodeTable()
    ids = from_terms(t, terms)
    h = node_hash_table(t)
    return [h[ids[id(x)]] for x in terms]


@pytest.fixture(scope="module", params=sorted(PLANS))
def pair(request):
    p = spec_lang.load(PLANS[request.param])
    return request.param, p, _round_trip(p)[1]


def test_round_trip_keeps_the_terms_and_fields(pair):
    name, p, q = pair
    ts = lambda x: [t for g in x.goals for t in (g.expected, g.actual)]  # noqa: E731
    assert _hashes(ts(p)) == _hashes(ts(q))
    assert [(g.name, g.kind, g.placement, g.site, g.layer) for g in p.goals] == \
        [(g.name, g.kind, g.placement, g.site, g.layer) for g in q.goals]
    assert dict(p.binding) == dict(q.binding) and list(p.mesh.items()) == list(q.mesh.items())
    assert p.assumptions == q.assumptions and q.frontend == "dsl"
    assert list(p.spec_outputs) == list(q.spec_outputs)
    assert _hashes(list(p.spec_outputs.values())) == _hashes(list(q.spec_outputs.values()))
    assert [(c.name, c.kind) for c in p.cut_points] == [(c.name, c.kind) for c in q.cut_points]
    assert _hashes([t for c in p.cut_points for t in (c.spec, c.plan)]) == \
        _hashes([t for c in q.cut_points for t in (c.spec, c.plan)])
    fields = ("side", "name", "p", "dims", "stream_index", "order", "site", "unmodelled",
              "stage", "stage_axis")
    assert [tuple(getattr(r, f) for f in fields) for r in p.rng] == \
        [tuple(getattr(r, f) for f in fields) for r in q.rng]
    assert [(r.stream.seed, r.stream.fork) if r.stream else None for r in p.rng] == \
        [(r.stream.seed, r.stream.fork) if r.stream else None for r in q.rng]
    assert _hashes([t for r in p.rng for t in (r.spec_input, r.mask)]) == \
        _hashes([t for r in q.rng for t in (r.spec_input, r.mask)])
    if name.startswith("dropout"):
        assert any(r.side == "plan" for r in q.rng)


def test_the_schedule_reads_the_same(pair):
    name, p, q = pair
    if name == "pipeline":
        assert isinstance(q.schedule, PipelineRecord)
    elif name == "accumulation":
        assert isinstance(q.schedule, AccumulationRecord)
    if p.schedule is None:
        assert q.schedule is None
        return
    pp = p.mesh.get("pp", 1)
    for g in p.goals:
        for r in range(pp):
            assert schedule_context(p.schedule, g.name, g.kind, {"pp": r}) == \
                schedule_context(q.schedule, g.name, g.kind, {"pp": r}), g.name


def test_the_prover_decides_the_same_on_the_rebuilt_problem():
    from proofs.prover import prove

    for key in ("tiny", "accumulation"):
        p = spec_lang.load(PLANS[key])
        a, b = prove(p), prove(_round_trip(p)[1])
        assert a.verdict == b.verdict and a.counts == b.counts, key
        if a.counterexample is not None:
            assert a.counterexample.to_json() == b.counterexample.to_json()
    assert prove(spec_lang.load(PLANS["accumulation"])).verdict == "NOT EQUIVALENT"


@pytest.fixture(scope="module")
def doc():
    return json.loads(json.dumps(problem_to_data(spec_lang.load(PLANS["dropout-pp"]))))


def _set(path, value):
    def edit(d):
        *head, last = path
        for k in head:
            d = d[k]
        d[last] = value
    return edit


def _drop(key):
    return lambda d: d.pop(key)


EDITS = [
    ("missing key", _drop("goals"), "top level"),
    ("extra key", _set(["extra"], 1), "top level"),
    ("other format", _set(["format"], "x"), "format"),
    ("other version", _set(["version"], 2), "format"),
    ("unknown front end", _set(["frontend"], "jax"), "frontend"),
    ("binding size 0", _set(["binding", "B"], 0), "binding"),
    ("binding float", _set(["binding", "B"], 2.0), "binding"),
    ("mesh not pairs", _set(["mesh"], {"pp": 2}), "mesh"),
    ("goal id out of range", _set(["goals", 0, "actual"], 10**6), "goals[0].actual"),
    ("goal id a bool", _set(["goals", 0, "expected"], True), "goals[0].expected"),
    ("goal without site", lambda d: d["goals"][0].pop("site"), "goals[0]"),
    ("duplicate goal", lambda d: d["goals"].append(dict(d["goals"][0])), "twice"),
    ("no goals", _set(["goals"], []), "goals"),
    ("unknown op", lambda d: d["nodes"][0].__setitem__(0, "EVAL"), "nodes"),
    ("node duplicated", lambda d: d["nodes"].append(d["nodes"][0]), "nodes"),
    ("forward reference", lambda d: d["nodes"][-1][1].append(len(d["nodes"])), "nodes"),
    ("ill-typed node", lambda d: d["nodes"][-1].__setitem__(3, [["Q", []]]), "nodes"),
    ("sympy constant", lambda d: d["nodes"].insert(0, ["CONST", [], [{"sympy": "1"}], []]),
     "nodes"),
    ("rng p a float", _set(["rng", 0, "p"], 0.5), "rng[0].p"),
    ("rng mask out of range", _set(["rng", 0, "mask"], -1), "rng[0].mask"),
    ("rng side", _set(["rng", 0, "side"], "both"), "rng[0]"),
    ("stream seed a string", _set(["rng", 0, "stream"], {"seed": "1", "fork": [], "label": ""}),
     "rng[0].stream"),
    ("cut kind", lambda d: d["cut_points"].append({"name": "x", "spec": 0, "plan": 0,
                                                   "kind": "sideways"}), "cut_points"),
    ("event kind", lambda d: d["schedule"]["stages"][0].append(
        {"kind": "eval", "mb": 0, "chunk": 0, "factor": None, "axis": None, "op": None,
         "accumulate": False, "note": "", "site": ""}), "schedule.stages[0]"),
    ("holder outside the stages", _set(["schedule", "holders", "w0"], [99]), "schedule.holders"),
    ("seconds not text", _set(["seconds"], {"trace": 1}), "seconds"),
]


@pytest.mark.parametrize("what,edit,where", EDITS, ids=[e[0] for e in EDITS])
def test_malformed_data_is_rejected_with_one_line(doc, what, edit, where):
    d = copy.deepcopy(doc)
    edit(d)
    with pytest.raises(ProblemDataError) as ei:
        parse_problem_data(d)
    msg = str(ei.value)
    assert msg.startswith("traced data: ") and "\n" not in msg and where in msg, msg


def test_the_unedited_document_parses(doc):
    pd = parse_problem_data(copy.deepcopy(doc))
    assert pd.schedule["kind"] == "pipeline" and any(r["side"] == "plan" for r in pd.rng)


def test_unsupported_outputs_round_trip_and_malformed_ones_are_rejected(doc):
    d = copy.deepcopy(doc)
    d["unsupported"] = [["grad:w", "aten.foo.default has no lowering rule (train.py:12)"]]
    pd = parse_problem_data(d)
    assert pd.unsupported == (("grad:w", "aten.foo.default has no lowering rule (train.py:12)"),)
    assert to_problem(pd, "p.py", "0" * 64).unsupported == pd.unsupported
    d["unsupported"] = [["grad:w"]]
    with pytest.raises(ProblemDataError, match="unsupported"):
        parse_problem_data(d)


class _Done:
    """A finished re-trace whose child answered ``pd``."""

    def __init__(self, pd):
        self.pd, self.path = pd, "p.py"

    def result(self):
        return self.pd


def test_retrace_rejects_equivalent_when_the_plan_has_outputs_not_lowered():
    from proofs.certificate import certificate_of
    from proofs.errors import CertificateError
    from proofs.prover import prove
    from proofs.retrace import finish_retrace

    p = spec_lang.load(PLANS["tiny"])
    r = prove(p)
    assert r.verdict == "EQUIVALENT"
    cert = certificate_of(r)
    hashes = node_hash_table(NodeTable.from_json(cert["nodes"]))
    doc = json.loads(json.dumps(problem_to_data(p)))
    finish_retrace(_Done(parse_problem_data(copy.deepcopy(doc))), cert, hashes)  # accepted
    doc["unsupported"] = [["grad:extra", "aten.foo.default has no lowering rule (p.py:3)"]]
    with pytest.raises(CertificateError, match="could not lower 1 plan output"):
        finish_retrace(_Done(parse_problem_data(doc)), cert, hashes)
    cert["verdict"] = "UNKNOWN"
    finish_retrace(_Done(parse_problem_data(doc)), cert, hashes)
