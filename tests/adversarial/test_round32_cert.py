"""Adversarial round 32 (``tests/adversarial/ATTEMPTS.md``, "Round 32 (certificates, perf14)"),
against wip/advcert32 at a43a49e (= main after issue 14's perf14 commits b66bc11, a50e717,
9f4c94f, 863e993): the kernel's kept attribute keys and ``NodeTable.find_over`` (the checker's
cut substitution), the schema validated with its non-recursive ``$ref``s inlined, the cut
pre-pass ``premise_uses`` / ``assemble_cuts``'s "smt below", and ``_groups``' top-k sizes.

No false accept found: ``find_over`` is ``find`` with the attribute key kept from ``add`` /
``from_json`` (the same exact, type-tagged key), the inlined schema accepted and rejected every
mutated certificate as the original did (same best-match path and message), and every
``examples/*.py`` and ``examples/bugs/*.py`` verdict is the same at 853d73d and a43a49e.

* R32c-1 (prover robustness, a regression of b66bc11): crossing layer marks (the spec marks
  ``a`` below ``b``, the plan ``b`` below ``a``) whose premises both hold cut below (each over
  the other's variable) form a cycle in the premises' ``uses``; ``assemble_cuts`` computes
  ``smt_below[u]`` for a premise of the cycle before ``u``'s entry exists: ``KeyError`` ("prove:
  internal error", exit 2, no JSON on stdout, no certificate). At 853d73d the same plan gave a
  clean UNKNOWN (``premise a: premise b: not proved``) with a certificate and, for open goals,
  the goal refutation of the verdict phase (which the crash now skips).
* R32c-2 (latent, older than perf14): ``encode_attr`` encodes a decoded dim-spec attribute
  (``DimRef``, a ``tuple`` subclass) as a plain list, so ``{"dim": [n, s]}`` and ``[n, s]`` are
  two nodes with one Merkle hash, and a decoded table's ``to_json`` is not its document. No real
  certificate has a dim-spec attribute.
"""

from __future__ import annotations

import copy
import json
import random
import sys
from fractions import Fraction
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
ROUND32 = Path(__file__).resolve().parent / "plans" / "round32c"
PLANS_CUT = ROOT / "tests" / "proofs" / "plans_cut"


# -- helpers -------------------------------------------------------------------------------------
def _certificate(plan: Path, tmp_path: Path, name: str = "c.json") -> tuple[Path, dict]:
    from proofs.certificate import certificate_of, write_certificate
    from proofs.prover import prove
    from spec_lang import load

    r = prove(load(plan))
    assert r.verdict == "EQUIVALENT", r.verdict
    p = tmp_path / name
    write_certificate(p, certificate_of(r))
    return p, json.loads(p.read_text())


def _check(tmp_path: Path, cert: dict, name: str = "forged.json"):
    """``check_certificate`` (no re-trace) of ``cert``: the result, or the exception."""
    from proofs.certificate import write_certificate
    from proofs.checker import check_certificate
    from proofs.errors import CertificateError, MalformedCertificate

    p = tmp_path / name
    write_certificate(p, cert)
    try:
        return check_certificate(p, retrace=False)
    except (CertificateError, MalformedCertificate) as e:
        return e


def _desc(t, root: int) -> set[int]:
    seen, stack = set(), [root]
    while stack:
        n = stack.pop()
        if n not in seen:
            seen.add(n)
            stack.extend(t.nodes[n][1])
    return seen


def _lemma_images(cert: dict) -> list[int]:
    """Nodes of the cut steps' lemma sides that are not in the cut step's own sides: the
    images the checker's substitution (``find_over``) must find."""
    from proofs.kernel import NodeTable

    t = NodeTable.from_json(cert["nodes"])
    out: set[int] = set()
    for s in cert["steps"]:
        if s["kind"] == "cut":
            lem = cert["steps"][s["lemma"]]
            for side in ("lhs", "rhs"):
                out |= _desc(t, lem[side]) - _desc(t, s[side])
    return sorted(out)


# -- R32c-1: crossing marks ------------------------------------------------------------------------
def test_r32_1_crossing_marks_do_not_crash_the_prover():
    """A correct plan whose layer marks cross the spec's: the two premises use each other.
    Right: no exception; EQUIVALENT, or UNKNOWN as at 853d73d (~3 s)."""
    from proofs.prover import prove
    from spec_lang import load

    r = prove(load(ROUND32 / "r32c_01_crossing_marks.py"))
    assert r.verdict in ("EQUIVALENT", "UNKNOWN")   # fixed in stop 32 (smt_below.get)


def test_r32_1_mechanism_premise_uses_form_a_cycle():
    """The mechanism, and the pre-pass is not at fault: ``premise_uses`` agrees with the built
    premises' ``uses`` on the crossing plan, and the two premises use each other."""
    import proofs.cut as C
    from spec_lang import load

    pb = load(ROUND32 / "r32c_01_crossing_marks.py")
    cuts = C.build_cuts(pb.cut_points, permutes=C.input_permutes(pb.goals))
    names = [c.name for c in cuts]
    built = C.premise_obligations(cuts, names)
    got = C.premise_uses(cuts, names)
    assert got == {n: built[n].uses for n in names}
    assert "b" in got["a"] and "a" in got["b"]


def test_r32_crossing_marks_wrong_plan_is_refuted():
    """r32_01 with the plan's loss scaled by 3: NOT EQUIVALENT at the loss (the refutation comes
    before the cut assembly that crashes on the right plan)."""
    from proofs.prover import prove
    from spec_lang import load

    r = prove(load(ROUND32 / "r32c_02_crossing_marks_buggy.py"))
    assert r.verdict == "NOT EQUIVALENT" and r.counterexample.goal == "loss"


# -- find_over ------------------------------------------------------------------------------------
_TRICKY = [1, True, Fraction(1), (1,), (True,), (Fraction(1),), ((1, True),), ((True, 1),),
           frozenset({1}), frozenset({True}), frozenset({(1,)}), frozenset({(True,)}), "1", None,
           0, False, Fraction(0), -1, 2**62, -(2**62), ("H", ())]


def _tricky_table():
    """INPUTs x, y and, for every tricky attribute value v, a ``CAST`` node over x with the one
    attribute v (the table itself does not typecheck: any value is a row)."""
    from proofs.kernel import NodeTable

    t = NodeTable()
    dims = (("B", ()), ("H", ()))
    x = t.add("INPUT", [], ("x", "data", "real"), dims)
    y = t.add("INPUT", [], ("y", "data", "real"), dims)
    vals = list(_TRICKY)   # no DimRef: it does not survive the JSON round trip (R32c-2)
    over_x = {i: t.add("CAST", [x], (v,), dims) for i, v in enumerate(vals)}
    return t, x, y, vals, over_x, dims


def test_find_over_is_find_with_the_kept_key():
    """Over x every tricky value is its own node (exact keys); ``find_over(n, args)`` equals
    ``find(op, args, attrs, dims)`` for every node and every argument tuple, also after a JSON
    round trip (the keys ``from_json`` keeps), and over y nothing exists until added."""
    from proofs.kernel import NodeTable

    t, x, y, vals, over_x, dims = _tricky_table()
    assert len(set(over_x.values())) == len(over_x)
    for tab in (t, NodeTable.from_json(json.loads(json.dumps(t.to_json())))):
        for n, (op, args, attrs, ds) in enumerate(tab.nodes):
            for a in ((), (x,), (y,), (x, y)):
                assert tab.find_over(n, a) == tab.find(op, a, attrs, ds)
        for i, n in over_x.items():
            assert tab.find_over(n, (y,)) is None
    # y's images added one by one: each is found by exactly its own x-node
    for i, n in over_x.items():
        op, args, attrs, ds = t.nodes[n]
        m = t.add(op, [y], attrs, ds)
        assert t.find_over(n, (y,)) == m
        for j, k in over_x.items():
            if j > i:
                assert t.find_over(k, (y,)) is None


def test_checker_subst_never_takes_an_image_of_other_attr_type_or_dim_order():
    """``_Checker.subst`` over a node whose only image differs in an attribute's type (1 vs
    True vs Fraction(1), nested, in a set) or in the order of its dims: "lacks node"."""
    from proofs.checker import _Checker
    from proofs.errors import CertificateError
    from proofs.kernel import DimRef, NodeTable

    pairs = [(1, True), (True, 1), (Fraction(1), 1), ((1,), (True,)), (((1, True),), ((True, 1),)),
             (frozenset({1}), frozenset({True})), (frozenset({(1,)}), frozenset({(True,)})),
             (0, False), (DimRef("H", ()), ("H", ())), (("H", ()), DimRef("H", ()))]
    for a, b in pairs:
        t = NodeTable()
        dims = (("B", ()), ("H", ()))
        x = t.add("INPUT", [], ("x", "data", "real"), dims)
        y = t.add("INPUT", [], ("y", "data", "real"), dims)
        n = t.add("CAST", [x], (a,), dims)
        t.add("CAST", [y], (b,), dims)                      # other attr type
        t.add("CAST", [y], (a,), tuple(reversed(dims)))     # other dim order
        chk = _Checker({"binding": {"B": 2, "H": 2}, "steps": []}, t, 1.0)
        with pytest.raises(CertificateError, match="lacks node"):
            chk.subst(n, {x: y}, "t")
        m = t.add("CAST", [y], (a,), dims)
        chk = _Checker({"binding": {"B": 2, "H": 2}, "steps": []}, t, 1.0)
        assert chk.subst(n, {x: y}, "t") == m


@pytest.fixture(scope="module")
def collide_cert(tmp_path_factory):
    return _certificate(PLANS_CUT / "collide_fixed.py", tmp_path_factory.mktemp("r32"))[1]


def test_cut_lemma_image_with_dims_reordered_is_rejected_at_the_substitution(collide_cert,
                                                                              tmp_path):
    """A real certificate with cut steps (tests/proofs/plans_cut/collide_fixed.py): each lemma
    image node with two or more dims, its dims reversed in the JSON. The rule steps of the
    lemma accept it (named dims), the cut does not: "lacks node" at the substitution, or, since
    class cuts (the lemma matched against the goal node by node), "differ in op, dims"."""
    imgs = [j for j in _lemma_images(collide_cert) if len(collide_cert["nodes"][j][3]) > 1
            and collide_cert["nodes"][j][0] != "INPUT"]
    assert imgs
    for j in imgs:
        c = copy.deepcopy(collide_cert)
        c["nodes"][j][3] = c["nodes"][j][3][::-1]
        r = _check(tmp_path, c)
        assert isinstance(r, Exception) and ("lacks node" in str(r)
                                             or "differ in op, dims" in str(r)), (j, r)


@pytest.mark.parametrize("new", [[{"set": []}], [[], 0], [[], True], [[], None]])
def test_cut_lemma_image_with_attrs_retyped_is_rejected(collide_cert, tmp_path, new):
    """The lemma image ``EINSUM`` with out dims ``[]``: as a set, with an extra attribute. The
    kernel's typecheck takes them (``tuple(attrs[0])``; EINSUM's arity is not checked) and so do
    the lemma's steps; the cut's substitution looks for the original attributes: rejected."""
    from proofs.kernel import NodeTable

    t = NodeTable.from_json(collide_cert["nodes"])
    imgs = [j for j in _lemma_images(collide_cert) if t.nodes[j][0] == "EINSUM"
            and t.nodes[j][2] == ((),)]
    assert imgs
    for j in imgs:
        c = copy.deepcopy(collide_cert)
        c["nodes"][j][2] = new
        r = _check(tmp_path, c)
        assert isinstance(r, Exception), (j, new)
        assert "lacks node" in str(r) or "differ in attrs" in str(r) or "duplicates" in str(r)


def test_duplicate_rows_under_an_exact_key_are_rejected():
    """Rows equal under ``==`` but not under the exact key are distinct nodes; rows with one
    exact key are duplicates (``{"q": "1/1"}`` and ``{"q": "1/1"}``, ``[1]`` twice)."""
    from proofs.kernel import KernelError, NodeTable, node_hash_table

    inp = ["INPUT", [], ["x", "data", "real"], [["B", []]]]
    for a, b, dup in [(1, True, False), (1, {"q": "1/1"}, False), ([1], [True], False),
                      ({"set": [1]}, {"set": [True]}, False), ({"q": "1/1"}, {"q": "1/1"}, True),
                      ([1, [True]], [1, [True]], True), ({"dim": ["B", []]}, {"dim": ["B", []]}, True)]:
        rows = [inp, ["CAST", [0], [a], [["B", []]]], ["CAST", [0], [b], [["B", []]]]]
        if dup:
            with pytest.raises(KernelError, match="duplicates"):
                NodeTable.from_json(rows)
        else:
            t = NodeTable.from_json(rows)
            assert t.find_over(1, (0,)) == 1 and t.find_over(2, (0,)) == 2
            h = node_hash_table(t)
            assert h[1] != h[2]


def _cut_edits(cert: dict):
    """Every edit of every cut step's cut points and lemma: (name, forged certificate)."""
    for k, s in enumerate(cert["steps"]):
        if s["kind"] != "cut":
            continue
        cps = s["cuts"]
        for h in range(len(cps)):
            if len(cps) > 1:
                yield f"{k} drop cut {h}", lambda st, h=h: st["cuts"].pop(h)
            yield f"{k} duplicate cut {h}", lambda st, h=h: st["cuts"].append(dict(st["cuts"][h]))
            yield f"{k} premise is the lemma", \
                lambda st, h=h: st["cuts"][h].__setitem__("premise", st["lemma"])
            yield f"{k} premise is the step", \
                lambda st, h=h, k=k: st["cuts"][h].__setitem__("premise", k)
            yield f"{k} premise one earlier", \
                lambda st, h=h: st["cuts"][h].__setitem__("premise", st["cuts"][h]["premise"] - 1)
            yield f"{k} var is embed", \
                lambda st, h=h: st["cuts"][h].__setitem__("var", st["cuts"][h]["embed"])
            yield f"{k} spec is plan", \
                lambda st, h=h: st["cuts"][h].__setitem__("spec", st["cuts"][h]["plan"])
        if len(cps) > 1:
            yield f"{k} premises swapped", lambda st: (
                st["cuts"][0].__setitem__("premise", st["cuts"][1]["premise"]),
                st["cuts"][1].__setitem__("premise", st["cuts"][0]["premise"]))
            yield f"{k} vars swapped", lambda st: (
                st["cuts"][0].__setitem__("var", st["cuts"][1]["var"]),
                st["cuts"][1].__setitem__("var", st["cuts"][0]["var"]))
        yield f"{k} lemma is a premise", lambda st: st.__setitem__("lemma", st["cuts"][0]["premise"])
        yield f"{k} lemma one earlier", lambda st: st.__setitem__("lemma", st["lemma"] - 1)
        yield f"{k} lhs and rhs swapped", lambda st: (st.__setitem__("lhs", st["rhs"]),
                                                        st.__setitem__("rhs", st["lhs"]))


def test_cut_step_edits_are_rejected(collide_cert, tmp_path):
    """Premise / uses edits of every cut step of a real certificate (drop, duplicate, swap
    premises or vars, a premise or lemma that is another step, the lemma as premise, var :=
    embed, spec := plan, lhs / rhs swapped): each rejected (the no-op edits excepted: a
    premise one earlier that proves the same pair)."""
    from proofs.kernel import NodeTable

    done = 0
    for k, s in enumerate(collide_cert["steps"]):
        if s["kind"] != "cut":
            continue
        for name, edit in _cut_edits({"steps": [dict(x) for x in collide_cert["steps"]]}):
            if not name.startswith(f"{k} "):
                continue
            c = copy.deepcopy(collide_cert)
            st = c["steps"][k]
            before = json.dumps(st, sort_keys=True)
            edit(st)
            if json.dumps(st, sort_keys=True) == before:
                continue
            same_pair = [(c["steps"][cp["premise"]]["lhs"], c["steps"][cp["premise"]]["rhs"])
                         for cp in st["cuts"] if 0 <= cp["premise"] < len(c["steps"])] == \
                [(collide_cert["steps"][cp["premise"]]["lhs"],
                  collide_cert["steps"][cp["premise"]]["rhs"]) for cp in s["cuts"]] and \
                (c["steps"][st["lemma"]]["lhs"], c["steps"][st["lemma"]]["rhs"]) == \
                (collide_cert["steps"][s["lemma"]]["lhs"], collide_cert["steps"][s["lemma"]]["rhs"]) \
                and [{x: cp[x] for x in ("spec", "plan", "var", "embed")} for cp in st["cuts"]] \
                == [{x: cp[x] for x in ("spec", "plan", "var", "embed")} for cp in s["cuts"]] \
                and (st["lhs"], st["rhs"]) == (s["lhs"], s["rhs"])
            r = _check(tmp_path, c)
            if same_pair:
                continue        # an equivalent proof: acceptance is right
            lem = c["steps"][st["lemma"]] if 0 <= st["lemma"] < k else None
            if lem is not None and (lem["lhs"], lem["rhs"]) == (st["lhs"], st["rhs"]):
                continue        # the lemma proves the claim itself (a class cut instantiating
                #                 no var: the claim, e.g. "34 lemma is a premise" on 34 == 34)
            assert isinstance(r, Exception), (name, st)
            done += 1
    assert done >= 20


@pytest.mark.slow
def test_two_point_cut_step_edits_are_rejected(tmp_path):
    """As above on the two-point cut steps of examples/llama_debug_dp.py (the first two):
    dropping a cut point leaves a cut variable the substitution cannot place ("lacks node"),
    swapped premises / vars, duplicates, other steps: 38 edits, each rejected (~30 s)."""
    _, cert = _certificate(ROOT / "examples" / "llama_debug_dp.py", tmp_path, "dp.json")
    two = [k for k, s in enumerate(cert["steps"]) if s["kind"] == "cut" and len(s["cuts"]) == 2]
    assert len(two) >= 2
    n = 0
    for k in two[:2]:
        for name, edit in _cut_edits({"steps": cert["steps"]}):
            if not name.startswith(f"{k} "):
                continue
            c = copy.deepcopy(cert)
            edit(c["steps"][k])
            r = _check(tmp_path, c)
            assert isinstance(r, Exception), name
            n += 1
    assert n >= 30


# -- R32c-2: a dim-spec attribute re-encodes as a list ---------------------------------------------
def test_r32_2_dim_attribute_and_list_attribute_hash_apart():
    """Two rows of one certificate, a ``CONST`` with attribute ``{"dim": ["a", ["dp"]]}`` and one
    with ``["a", ["dp"]]``: distinct nodes (their exact keys differ: ``DimRef`` vs ``tuple``),
    but ``encode_attr`` tests ``tuple`` before the dim-spec case and ``DimRef`` is a tuple, so
    both re-encode as ``["a", ["dp"]]``: the same Merkle hash for two different nodes, and
    ``to_json`` of the decoded table is not the document (``decode_attr`` is documented as the
    inverse of ``encode_attr``). The prover's own ``DimSpec`` encodes as ``{"dim"}``, so a
    certificate with a dim-spec attribute would hash differently in the prover and the checker.
    Latent: no op of a real certificate carries a dim-spec attribute (none in the examples)."""
    from proofs.kernel import NodeTable, node_hash_table

    rows = [["CONST", [], [{"dim": ["a", ["dp"]]}], []], ["CONST", [], [["a", ["dp"]]], []]]
    t = NodeTable.from_json(rows)
    assert t.to_json() == rows
    h = node_hash_table(t)
    assert h[0] != h[1]


# -- the "smt" label ------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def smt_cert():
    sys.path.insert(0, str(ROOT / "tests" / "proofs"))
    try:
        from test_certificate import _problem
    finally:
        sys.path.pop(0)
    from proofs.certificate import certificate_of
    from proofs.prover import prove

    r = prove(_problem())
    assert r.counts["smt"] == 1
    return json.loads(json.dumps(certificate_of(r), sort_keys=True))


def test_smt_label_is_not_what_the_checker_counts(smt_cert, tmp_path):
    """The goal proved by z3 relabelled ``rewrite`` (and the summary edited): accepted, but the
    checker reports its own count of regenerated z3 queries (1), not the label; a rewrite-only
    goal relabelled ``smt`` is rejected ("method smt but the proof has no smt step")."""
    c = copy.deepcopy(smt_cert)
    o = next(o for o in c["obligations"] if o["method"] == "smt")
    o["method"] = "rewrite"
    c["summary"]["smt"], c["summary"]["rewrite"] = 0, c["summary"]["rewrite"] + 1
    r = _check(tmp_path, c)
    assert not isinstance(r, Exception) and r.verdict == "EQUIVALENT" and r.smt == 1
    c = copy.deepcopy(smt_cert)
    o = next(o for o in c["obligations"] if o["method"] == "rewrite")
    o["method"] = "smt"
    r = _check(tmp_path, c)
    assert isinstance(r, Exception) and "method smt but the proof has no smt step" in str(r)


def test_reused_of_a_relabelled_source_still_needs_a_proved_source(smt_cert, tmp_path):
    """A ``reused`` goal whose source is relabelled ``open`` / ``refuted`` / unknown: rejected."""
    c0 = copy.deepcopy(smt_cert)
    reused = [o for o in c0["obligations"] if o["method"] == "reused"]
    assert reused
    src = reused[0]["reuses"]
    for m in ("open", "refuted", "smt2", "reused"):
        c = copy.deepcopy(c0)
        s = next(o for o in c["obligations"] if o["name"] == src)
        s["method"] = m
        s["reason"] = "x"
        r = _check(tmp_path, c)
        assert isinstance(r, Exception), m


# -- the inlined schema ---------------------------------------------------------------------------
def _paths(x, p=()):
    yield p
    if isinstance(x, dict):
        for k, v in x.items():
            yield from _paths(v, p + (k,))
    elif isinstance(x, list):
        for i, v in enumerate(x[:30]):
            yield from _paths(v, p + (i,))


_VALUES = [None, True, False, 0, 1, -1, 2**70, "", "x", "0" * 64, [], {}, [1], ["x"],
           {"q": "1/2"}, {"q": "2/4"}, {"q": 1}, {"alg": []}, {"set": [1]}, {"dim": ["a", []]},
           {"node": 0}, {"nodes": [0]}, {"node": -1}, [None], [[]], "smt", "cut", "refl",
           {"alg": [["1/2", [["2", "1/2"]]]]}, {"alg": [["1/2", [["pi", "-1/2"]]]]}, "unsat"]


def _mutate(doc, rng):
    d = copy.deepcopy(doc)
    for _ in range(rng.choice([1, 1, 2, 3])):
        ps = [p for p in _paths(d) if p]
        p = rng.choice(ps)
        par = d
        for k in p[:-1]:
            par = par[k]
        k, r = p[-1], rng.random()
        if r < 0.5:
            par[k] = copy.deepcopy(rng.choice(_VALUES))
        elif r < 0.65:
            del par[k]
        elif r < 0.8 and isinstance(par, dict):
            par[rng.choice(["extra", "kind", "q", "node", "set", "var", "embed"])] = \
                copy.deepcopy(rng.choice(_VALUES))
        else:
            src = d
            for kk in rng.choice(ps):
                src = src[kk]
            par[k] = copy.deepcopy(src)
    return d


def test_inlined_schema_decides_as_the_original(smt_cert):
    """100 random edits of a certificate with every step kind (smt, cas, rename, cut-free
    proofs, reused): ``inline_refs(schema)`` and the schema itself give the same best-match
    error (instance path and message), or both none (a fuzz by hand of 3,000 edits of three
    certificates, /tmp/advcert32/schema_fuzz.py: 0 differences)."""
    import jsonschema

    from proofs.checker_load import SCHEMA_PATHS, inline_refs

    s = json.loads(next(p for p in SCHEMA_PATHS if p.exists()).read_text())
    vs = jsonschema.Draft202012Validator(s)
    vi = jsonschema.Draft202012Validator(inline_refs(copy.deepcopy(s)))

    def res(v, d):
        e = jsonschema.exceptions.best_match(v.iter_errors(d))
        return None if e is None else (list(e.absolute_path), e.message)

    rng = random.Random(32)
    valid = 0
    for _ in range(100):
        d = _mutate(smt_cert, rng)
        a = res(vs, d)
        assert a == res(vi, d), d
        valid += a is None
    assert 0 < valid < 100
