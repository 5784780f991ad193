"""Certificates: round trip, schema, the independent checker, and tampered certificates."""

import copy
import json
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest

from proofs.certificate import certificate_of, write_certificate
from proofs.checker import check_certificate
from proofs.errors import CertificateError, MalformedCertificate
from proofs.prover import prove

from spec_lang.term import DimSpec, Op, term
from terms import SIZES, add, inp, mul, problem, row_parallel

ROOT = Path(__file__).resolve().parents[2]
SCHEMA = json.loads((ROOT / "docs" / "certificate.schema.json").read_text())


def _problem():
    spec, plan = row_parallel()
    spec2, plan2 = row_parallel("x2", "w2")
    y, z, w = inp("y", "B"), inp("z", "B"), inp("w", "B")
    mx = lambda a, b: term(Op.MAXIMUM, (a, b), (), (DimSpec("B"),))  # noqa: E731
    return problem([("grad:w1", "grad", spec, plan),                              # rewrite
                    ("grad:w", "grad", mul(w, mx(y, z)), mul(mx(z, y), w)),       # smt
                    ("grad:w3", "grad", mul(y, add(z, w)), add(mul(y, z), mul(y, w))),  # cas
                    ("grad:w2", "grad", spec2, plan2)], SIZES)                    # reused


@pytest.fixture(scope="module")
def cert_dict():
    r = prove(_problem())
    assert r.verdict == "EQUIVALENT"
    assert r.counts == {"total": 4, "rewrite": 2, "smt": 1, "reused": 1, "open": 0, "refuted": 0}
    return certificate_of(r)


def _write(tmp_path, c, name="c.json"):
    p = tmp_path / name
    write_certificate(p, c)
    return p


def test_round_trip_and_schema(tmp_path, cert_dict):
    p = _write(tmp_path, cert_dict)
    back = json.loads(p.read_text())
    assert back == json.loads(json.dumps(cert_dict, sort_keys=True))
    assert p.read_text() == json.dumps(back, sort_keys=True, separators=(",", ":")) + "\n"
    jsonschema.Draft202012Validator.check_schema(SCHEMA)
    jsonschema.validate(back, SCHEMA, cls=jsonschema.Draft202012Validator)
    assert back["format"] == "shardproof-certificate" and back["format_version"] == 3
    assert {s["kind"] for s in back["steps"]} >= {"rule", "congr", "trans", "sym", "smt", "cas"}
    r = check_certificate(p, retrace=False)
    assert (r.verdict, r.checked, r.total, r.smt) == ("EQUIVALENT", 4, 4, 1)


def test_packaged_schema_is_the_documented_one():
    assert (ROOT / "proofs" / "certificate.schema.json").read_text() == \
        (ROOT / "docs" / "certificate.schema.json").read_text()


def test_write_is_atomic(tmp_path, cert_dict):
    p = _write(tmp_path, cert_dict)
    assert [x.name for x in tmp_path.iterdir()] == [p.name]  # no temp file left behind


# -- tampering: every edit must be rejected ------------------------------------------------------
def _first(c, kind):
    return next(s for s in c["steps"] if s["kind"] == kind)


def _goal_node_ids(c):
    return {o[k] for o in c["obligations"] for k in ("expected", "actual")}


def _edit_rule_name(c):
    st = _first(c, "rule")
    st["rule"] = "allreduce-max-invariant" if st["rule"] != "allreduce-max-invariant" \
        else "allreduce-part"


def _edit_subst(c):
    st = next(s for s in c["steps"] if s["kind"] == "rule"
              and any(isinstance(v, dict) and ("node" in v or "nodes" in v)
                      for v in s["subst"].values()))
    k, v = next((k, v) for k, v in st["subst"].items()
                if isinstance(v, dict) and ("node" in v or "nodes" in v))
    if "node" in v:
        v["node"] = (v["node"] + 1) % len(c["nodes"])
    else:
        v["nodes"][0] = (v["nodes"][0] + 1) % len(c["nodes"])


def _edit_subst_attr(c):
    st = next(s for s in c["steps"] if s["kind"] == "rule"
              and any(v in ("tp", "dp") for v in s["subst"].values()))
    k = next(k for k, v in st["subst"].items() if v in ("tp", "dp"))
    st["subst"][k] = "dp" if st["subst"][k] == "tp" else "tp"


def _edit_goal_node_attr(c):
    i = next(i for i, n in enumerate(c["nodes"]) if n[0] == "SHARD")
    c["nodes"][i][2][1] = "dp"  # shard over dp instead of tp


def _edit_goal_node_op(c):
    i = next(i for i, n in enumerate(c["nodes"]) if n[0] == "ALL_REDUCE")
    c["nodes"][i][0] = "BROADCAST"
    c["nodes"][i][2] = ["tp", 0]


def _edit_intermediate_node(c):
    goal = _goal_node_ids(c)
    below = set()
    stack = list(goal)
    while stack:
        i = stack.pop()
        if i not in below:
            below.add(i)
            stack.extend(c["nodes"][i][1])
    i = next(i for i, n in enumerate(c["nodes"]) if i not in below and n[0] == "EINSUM")
    c["nodes"][i][2][0] = c["nodes"][i][2][0][:1]  # drop an output dim of a rewritten node
    c["nodes"][i][3] = c["nodes"][i][3][:1]


def _edit_dims(c):
    i = next(i for i, n in enumerate(c["nodes"]) if n[0] == "SHARD")
    c["nodes"][i][3] = [[d, []] for d, _ in c["nodes"][i][3]]


def _edit_spec_hash(c):
    c["spec_sha256"] = "0" * 64


def _edit_plan_hash(c):
    c["plan_sha256"] = c["spec_sha256"]


def _edit_obligation_hash(c):
    c["obligations"][0]["actual_sha256"] = c["obligations"][0]["expected_sha256"]


def _drop_step(c):
    k = c["steps"].index(_first(c, "rule"))
    del c["steps"][k]


def _swap_obligation_terms(c):
    o = c["obligations"][0]
    o["expected"], o["actual"] = o["actual"], o["expected"]


def _swap_between_obligations(c):
    a, b = c["obligations"][0], c["obligations"][1]
    a["expected"], b["expected"] = b["expected"], a["expected"]


def _verdict_not_equivalent(c):
    c["verdict"] = "NOT EQUIVALENT"


def _verdict_unknown(c):
    c["verdict"] = "UNKNOWN"


def _edit_smt2_text(c):
    st = _first(c, "smt")
    st["smt2"] = st["smt2"].replace("(assert", "(assert true)\n(assert", 1)


def _edit_smt_binding(c):
    st = _first(c, "smt")
    st["binding"]["tp"] = 1


def _edit_smt_nodes(c):
    st = _first(c, "smt")
    st["rhs"] = st["lhs"]


def _edit_ruleset(c):
    c["ruleset"]["sha256"] = "f" * 64


def _edit_binding(c):
    c["binding"]["tp"] = 4


def _edit_congr_arg(c):
    st = next(s for s in c["steps"] if s["kind"] == "congr" and any(a is not None for a in s["args"]))
    k = next(k for k, a in enumerate(st["args"]) if a is not None)
    st["args"][k] = None


def _reorder_trans(c):
    st = next(s for s in c["steps"] if s["kind"] == "trans" and len(s["steps"]) >= 2)
    st["steps"] = st["steps"][::-1]


def _reuse_wrong_obligation(c):
    o = next(o for o in c["obligations"] if o["method"] == "reused")
    o["reuses"] = "grad:w"


def _claim_open_as_proved(c):
    o = next(o for o in c["obligations"] if o["method"] == "reused")
    o["method"] = "rewrite"
    o["proof"] = c["obligations"][0]["proof"]
    del o["reuses"]


def _duplicate_node(c):
    c["nodes"].append(copy.deepcopy(c["nodes"][0]))


def _edit_cas_nodes(c):
    st = _first(c, "cas")
    st["rhs"] = next(i for i, n in enumerate(c["nodes"]) if n[0] == "INPUT"
                     and n[3] == c["nodes"][st["lhs"]][3])


def _sym_of_wrong_step(c):
    st = _first(c, "sym")
    st["of"] = max(0, st["of"] - 1)


def _edit_binding_dim(c):
    c["binding"]["B"] += 1  # still a valid size for every node: only the hash catches it


def _edit_binding_axis_indivisible(c):
    c["binding"]["tp"] = 3


def _add_binding_dim(c):
    c["binding"]["Z"] = 3


def _refute(c, name):
    """Mark obligation ``name`` refuted as the prover would, with a replay of it."""
    o = next(o for o in c["obligations"] if o["name"] == name)
    o["method"], o["reason"] = "refuted", "values differ on random inputs"
    o.pop("proof", None)
    o.pop("reuses", None)
    c["verdict"] = "NOT EQUIVALENT"
    c["counterexample"] = {
        "goal": name, "kind": o["kind"], "tensor": name, "placement": "", "site": "x.py:1",
        "rank": {}, "index": {}, "values": [{"element": "(scalar)", "spec": "1.0", "plan": "0.5"}],
        "ratio": "0.5", "explanation": "= 0.500 x spec", "reduced_binding": dict(c["binding"]),
        "seed": 0, "also_diverging": [],
        "replay": {"goals": [name], "seed": 0, "binding": dict(c["binding"])}}
    return o


def _forge_not_equivalent(c):  # F3: a correct obligation claimed refuted with a counterexample
    _refute(c, "grad:w2")


def _forge_refuted_keeping_proof(c):
    proof = next(o for o in c["obligations"] if o["name"] == "grad:w3")["proof"]
    _refute(c, "grad:w3")["proof"] = proof


def _forge_refuted_with_proved_pair(c):
    _refute(c, "grad:w3")  # its proof step is still in the table


def _forge_replay_other_goal(c):
    _refute(c, "grad:w2")
    c["counterexample"]["replay"]["goals"] = ["grad:w1"]


def _forge_replay_mesh_reduced(c):
    _refute(c, "grad:w2")
    c["counterexample"]["replay"]["binding"]["tp"] = 1


def _forge_replay_larger_than_real(c):
    _refute(c, "grad:w2")
    c["counterexample"]["replay"]["binding"]["B"] *= 2


def _forge_counterexample_without_refuted(c):
    _refute(c, "grad:w2")
    o = next(o for o in c["obligations"] if o["name"] == "grad:w2")
    o["method"], o["reuses"] = "reused", "grad:w1"
    del o["reason"]


TAMPERED = [
    ("rule name", _edit_rule_name, 4), ("substitution node", _edit_subst, 4),
    ("substitution attribute", _edit_subst_attr, 4), ("goal node attr", _edit_goal_node_attr, 4),
    ("goal node op", _edit_goal_node_op, 4), ("rewritten node", _edit_intermediate_node, 4),
    ("node dims", _edit_dims, 4), ("spec hash", _edit_spec_hash, 4),
    ("plan hash", _edit_plan_hash, 4), ("obligation hash", _edit_obligation_hash, 4),
    ("dropped step", _drop_step, 4), ("swapped expected/actual", _swap_obligation_terms, 4),
    ("terms swapped between obligations", _swap_between_obligations, 4),
    ("verdict NOT EQUIVALENT", _verdict_not_equivalent, 4), ("verdict UNKNOWN", _verdict_unknown, 4),
    ("smt2 text", _edit_smt2_text, 4), ("smt binding", _edit_smt_binding, 4),
    ("smt nodes", _edit_smt_nodes, 4), ("ruleset hash", _edit_ruleset, 4),
    ("binding", _edit_binding, 4), ("congr argument", _edit_congr_arg, 4),
    ("trans order", _reorder_trans, 4), ("reuse of a non-renaming", _reuse_wrong_obligation, 4),
    ("proof of another obligation", _claim_open_as_proved, 4), ("duplicate node", _duplicate_node, 4),
    ("sym of another step", _sym_of_wrong_step, 4), ("cas nodes", _edit_cas_nodes, 4),
    # F4: the binding is covered by spec_sha256 / plan_sha256 and every node's sizes are checked
    ("binding dim size", _edit_binding_dim, 4),
    ("binding axis not dividing a sharded dim", _edit_binding_axis_indivisible, 4),
    ("binding extra dim", _add_binding_dim, 4),
    # F3: a NOT EQUIVALENT verdict must replay: the refuted goals diverge when re-evaluated
    ("forged NOT EQUIVALENT on a correct goal", _forge_not_equivalent, 4),
    ("refuted obligation keeping its proof", _forge_refuted_keeping_proof, 4),
    ("refuted obligation the steps prove", _forge_refuted_with_proved_pair, 4),
    ("replay of another goal", _forge_replay_other_goal, 4),
    ("replay with a reduced mesh axis", _forge_replay_mesh_reduced, 4),
    ("replay larger than the real sizes", _forge_replay_larger_than_real, 4),
    ("counterexample without a refuted obligation", _forge_counterexample_without_refuted, 4),
]


@pytest.mark.parametrize("what,edit,code", TAMPERED, ids=[t[0] for t in TAMPERED])
def test_tampered_certificate_is_rejected(tmp_path, cert_dict, what, edit, code):
    c = copy.deepcopy(cert_dict)
    edit(c)
    assert c != cert_dict, what
    p = _write(tmp_path, c)
    with pytest.raises(CertificateError) as ei:
        check_certificate(p, retrace=False)
    assert "\n" not in str(ei.value)
    from proofs.cli import check_main
    assert check_main([str(p), "--no-retrace"]) == code


MALFORMED = [
    ("not json", lambda p: p.write_text("{not json")),
    ("other format", lambda p: p.write_text(json.dumps({"format": "x"}))),
    ("future version", lambda p: p.write_text(json.dumps(
        {"format": "shardproof-certificate", "format_version": 3}))),
    ("format version 1", lambda p: p.write_text(json.dumps(
        {"format": "shardproof-certificate", "format_version": 1}))),
    ("float in a certificate", lambda p: p.write_text(json.dumps(
        {"format": "shardproof-certificate", "format_version": 3, "x": 0.5}))),
    ("empty file", lambda p: p.write_text("")),
    ("not UTF-8", lambda p: p.write_bytes(b"\xff\xfe{}")),
]


@pytest.mark.parametrize("what,make", MALFORMED, ids=[m[0] for m in MALFORMED])
def test_malformed_certificate_exits_3(tmp_path, capsys, what, make):
    from proofs.cli import check_main

    p = tmp_path / "bad.json"
    make(p)
    with pytest.raises(MalformedCertificate):
        check_certificate(p, retrace=False)
    assert check_main([str(p), "--no-retrace"]) == 3
    err = capsys.readouterr().err
    assert err.startswith("check-certificate: error: ") and err.count("\n") == 1


def _node_of_op(c, op):
    return next(n for n in c["nodes"] if n[0] == op)


def _drop_key(k):
    return lambda c: c.pop(k)


# schema violations in a valid certificate: exit 3 whether or not the schema walks the node and
# step arrays (it does not past SCHEMA_FULL_LIMIT rows; the kernel then reports them)
MALFORMED_EDITS = [
    ("no nodes", _drop_key("nodes")),
    ("no steps", _drop_key("steps")),
    ("nodes not a list", lambda c: c.__setitem__("nodes", {"0": 1})),
    ("node row of 3 fields", lambda c: c["nodes"][0].pop()),
    ("unknown op", lambda c: c["nodes"][0].__setitem__(0, "FROB")),
    ("dim shards a string", lambda c: _node_of_op(c, "SHARD")[3][0].__setitem__(1, "tp")),
    ("attribute of no encoding", lambda c: c["nodes"][0][2].append({"x": 1})),
    ("SHARD without attributes", lambda c: _node_of_op(c, "SHARD").__setitem__(2, [])),
    ("counterexample without a replay", lambda c: _refute(c, "grad:w2") and
     c["counterexample"].pop("replay")),
]


@pytest.mark.parametrize("limit", [0, 10**9], ids=["kernel", "schema"])
@pytest.mark.parametrize("what,edit", MALFORMED_EDITS, ids=[m[0] for m in MALFORMED_EDITS])
def test_malformed_edit_exits_3(tmp_path, capsys, monkeypatch, cert_dict, what, edit, limit):
    import proofs.checker_load
    from proofs.cli import check_main

    monkeypatch.setattr(proofs.checker_load, "SCHEMA_FULL_LIMIT", limit)
    c = copy.deepcopy(cert_dict)
    edit(c)
    p = _write(tmp_path, c)
    assert check_main([str(p), "--no-retrace"]) == 3, capsys.readouterr().err
    err = capsys.readouterr().err
    assert err.startswith("check-certificate: error: ") and err.count("\n") == 1, err
    assert "internal error" not in err


def test_schema_violation_is_malformed(tmp_path, cert_dict):
    c = copy.deepcopy(cert_dict)
    _first(c, "smt")["answer"] = "sat"
    with pytest.raises(MalformedCertificate):
        check_certificate(_write(tmp_path, c), retrace=False)


def test_missing_file_exits_3(tmp_path):
    from proofs.cli import check_main

    assert check_main([str(tmp_path / "nope.json")]) == 3


# the checker's imports (neither egglog, nor rewriting, nor the prover, nor the DSL's tracer):
# tests/proofs/test_trusted_base.py


def test_checker_rule_table_is_the_producers():
    from proofs.checker_rules import RULES, RULESET
    from rewriting import RULES as PRODUCER
    from rewriting import RULESET as PRODUCER_SET

    assert RULESET == PRODUCER_SET
    assert [r.name for r in PRODUCER] == list(RULES)


@pytest.fixture(scope="module")
def refuted_dict():
    from fractions import Fraction

    from terms import const

    spec, plan = row_parallel()
    r = prove(problem([("loss", "loss", spec, mul(const(Fraction(1, 2)), plan))], SIZES))
    assert r.verdict == "NOT EQUIVALENT"
    return certificate_of(r)


def test_not_equivalent_certificate_checks(tmp_path, refuted_dict):
    p = _write(tmp_path, refuted_dict)
    c = json.loads(p.read_text())
    assert c["verdict"] == "NOT EQUIVALENT" and c["counterexample"]["goal"] == "loss"
    assert c["counterexample"]["replay"]["goals"] == ["loss"]
    jsonschema.validate(c, SCHEMA, cls=jsonschema.Draft202012Validator)
    r = check_certificate(p, retrace=False)
    assert (r.verdict, r.refuted) == ("NOT EQUIVALENT", 1)
    assert "1 refuted goals re-evaluated and diverging" in r.summary()


def _cx_index_moved(c):
    c["counterexample"]["index"] = {d: i + 1 for d, i in c["counterexample"]["index"].items()}


def _cx_other_goal(c):
    c["counterexample"]["goal"] = "grad:x"


def _refuted_claimed_equivalent(c):
    c["verdict"] = "EQUIVALENT"


def _refuted_claimed_unknown(c):
    c["verdict"] = "UNKNOWN"


TAMPERED_REFUTED = [
    ("first divergence moved", _cx_index_moved), ("counterexample of another goal", _cx_other_goal),
    ("verdict EQUIVALENT", _refuted_claimed_equivalent),
    ("verdict UNKNOWN", _refuted_claimed_unknown),
]


@pytest.mark.parametrize("what,edit", TAMPERED_REFUTED, ids=[t[0] for t in TAMPERED_REFUTED])
def test_tampered_refutation_is_rejected(tmp_path, refuted_dict, what, edit):
    c = copy.deepcopy(refuted_dict)
    edit(c)
    with pytest.raises(CertificateError):
        check_certificate(_write(tmp_path, c), retrace=False)


def test_congruence_between_leaves_of_different_dims_is_rejected(tmp_path, cert_dict):
    c = copy.deepcopy(cert_dict)
    i = next(i for i, n in enumerate(c["nodes"]) if n[0] == "INPUT" and n[3])
    fake = copy.deepcopy(c["nodes"][i])
    fake[3][0][1] = ["tp"]  # the same input claimed with a sharded dim
    c["nodes"].append(fake)
    c["steps"].append({"kind": "congr", "lhs": i, "rhs": len(c["nodes"]) - 1, "args": []})
    with pytest.raises(CertificateError, match="differ in dims"):
        check_certificate(_write(tmp_path, c), retrace=False)


def test_certificate_file_is_readable_by_others(tmp_path):
    # mkstemp creates 0600; a written certificate follows the umask like any other output file
    import os
    import stat

    from proofs.certificate import write_certificate
    old = os.umask(0o022)
    try:
        out = tmp_path / "c.json"
        write_certificate(out, {"format": "x"})
    finally:
        os.umask(old)
    assert stat.S_IMODE(out.stat().st_mode) == 0o644


OBLIGATION_EDITS = [
    ("method unknown", lambda c: c["obligations"][0].__setitem__("method", "magic")),
    ("expected negative", lambda c: c["obligations"][1].__setitem__("expected", -1)),
    ("sha256 not hex", lambda c: c["obligations"][0].__setitem__("expected_sha256", "xyz")),
    ("reused without reuses", lambda c: _first_reused(c).pop("reuses")),
    ("extra key", lambda c: c["obligations"][2].__setitem__("extra", 1)),
    ("plan sha256 short", lambda c: c["plan"].__setitem__("sha256", "ab")),
]


def _first_reused(c):
    return next(o for o in c["obligations"] if o["method"] == "reused")


@pytest.mark.parametrize("what,edit", [("valid", lambda c: None)] + MALFORMED_EDITS
                         + OBLIGATION_EDITS, ids=lambda x: x if isinstance(x, str) else "")
def test_inlined_schema_judges_as_the_published_one(cert_dict, what, edit):
    """Issue 14: the checker validates against ``inline_refs(schema)`` (non-recursive ``$ref``s
    replaced by their definitions): the same verdict and the same best error (message and
    instance path) as the published schema, on a valid certificate and on each malformed
    edit; the recursive ``attr`` definition stays a reference."""
    from proofs.checker_load import inline_refs

    inlined = inline_refs(SCHEMA)
    text = json.dumps(inlined)
    assert '"#/$defs/obligation"' not in text and '"#/$defs/sha256"' not in text
    assert '"#/$defs/attr"' in text
    c = copy.deepcopy(cert_dict)
    edit(c)

    def best(schema):
        e = jsonschema.exceptions.best_match(
            jsonschema.Draft202012Validator(schema).iter_errors(c))
        return None if e is None else (e.message, list(e.absolute_path))

    assert best(inlined) == best(SCHEMA)
    assert what != "valid" or best(SCHEMA) is None        # (a few edits are the kernel's)
    assert what not in dict(OBLIGATION_EDITS) or best(SCHEMA) is not None
