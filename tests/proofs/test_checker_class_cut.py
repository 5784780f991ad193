"""Class cuts (issue 14 item 2): a ``cut`` step that instantiates its layer class's lemma, its
other inputs renamed bijectively onto the goal's (docs/certificate.md, cut steps).

A real certificate from ``prove`` supplies the nodes and the steps: the lemma
``SHARD(EXP(x) * v1) == EXP(SHARD(x)) * SHARD(v1)`` over a ``cut:`` input ``x`` and a parameter
``v1``, and the premise ``SHARD(S) == SHARD(P)``. The tests cut a goal over ``v2`` with that
lemma, then edit the step one way at a time; each edit is rejected naming the step. A real
certificate of ``examples/llama_debug_megatron.py`` has its cuts made this way by ``prove``.
"""

import copy

import pytest

from proofs.certificate import certificate_of
from proofs.coq_cuts import expand_class_cuts
from proofs.prover import prove

from spec_lang.term import Op
from terms import SIZES, inp, mul, problem, row_parallel, shard, unary
from test_checker_cut import ROOT, Cert, _check, _rejected


def _ex(t):
    return unary(Op.EXP, t)


S, P = row_parallel()                       # layer output: spec (B, H), plan all-reduced (B, H)
XC = inp("cut:0", "B", "H", kind="cut")
V1, V2, V3 = inp("v1", "B", "H"), inp("v2", "B", "H"), inp("v3", "B", "H")
VD = inp("vd", "B", "H", kind="data")       # same dims, another kind


def _sides(x, p, v):
    """``SHARD(EXP(x) * v)`` and ``EXP(p) * SHARD(v)`` (p: x's plan value, sharded over dp)."""
    return shard(mul(_ex(x), v), "B", "dp"), mul(_ex(p), shard(v, "B", "dp"))


@pytest.fixture(scope="module")
def base():
    lem = _sides(XC, shard(XC, "B", "dp"), V1)
    goals = [("grad:aux_p", "grad", shard(S, "B", "dp"), shard(P, "B", "dp")),
             ("grad:aux_l", "grad", *lem),
             ("grad:f", "grad", *_sides(S, shard(P, "B", "dp"), V2))]
    r = prove(problem(goals, SIZES))
    assert r.verdict == "EQUIVALENT"
    c = certificate_of(r)
    assert all(s["kind"] not in ("cut", "rename") for s in c["steps"])
    return c


def _class_cut(base, v=V2, v_plan=None):
    """(Cert, cut step): goal ``_sides(S, SHARD(P), v)`` (plan side over ``v_plan``, default
    ``v``) from the lemma over ``v1`` at ``x := S``, embed ``SHARD(x)``, premise aux_p."""
    k = Cert(base)
    e, _ = _sides(S, shard(P, "B", "dp"), v)
    _, a = _sides(S, shard(P, "B", "dp"), v if v_plan is None else v_plan)
    cut = {"kind": "cut", "lhs": k.node(e), "rhs": k.node(a), "lemma": k.proof("grad:aux_l"),
           "cuts": [{"spec": k.node(S), "plan": k.ob["grad:aux_p"]["actual"],
                     "var": k.node(XC), "embed": k.node(shard(XC, "B", "dp")),
                     "premise": k.proof("grad:aux_p")}]}
    return k, cut


def _land(k, cut):
    k.prove_with("grad:f", k.step(cut), "rewrite")
    return k.c


def test_class_cut_is_accepted(tmp_path, base):
    k, cut = _class_cut(base)
    assert cut["lhs"] == k.ob["grad:f"]["expected"]
    r = _check(tmp_path, _land(k, cut))
    assert (r.verdict, r.checked, r.total) == ("EQUIVALENT", 3, 3)


def test_class_cut_onto_an_input_of_another_kind_is_rejected(tmp_path, base):
    k, cut = _class_cut(base, VD)
    k.step(cut)      # not an obligation's proof: the replay checks every step
    _rejected(tmp_path, k.c, "(cut)", "differ in kind or domain")


def test_class_cut_renaming_the_two_sides_differently_is_rejected(tmp_path, base):
    """v1 -> v2 on the spec side but v1 -> v3 on the plan side: one renaming for both."""
    k, cut = _class_cut(base, V2, V3)
    k.step(cut)
    _rejected(tmp_path, k.c, "(cut)", "not renamed consistently")


def test_class_cut_with_an_input_in_the_embed_is_rejected(tmp_path, base):
    k, cut = _class_cut(base)
    cut["cuts"][0]["embed"] = k.node(mul(shard(XC, "B", "dp"), shard(V1, "B", "dp")))
    k.step(cut)
    _rejected(tmp_path, k.c, "(cut)", "mentions input node")


def test_class_cut_with_one_embed_for_two_cut_points_is_rejected(tmp_path, base):
    k, cut = _class_cut(base)
    again = dict(cut["cuts"][0])
    again["var"] = k.node(inp("cut:0b", "B", "H", kind="cut"))
    cut["cuts"].append(again)
    k.step(cut)
    _rejected(tmp_path, k.c, "(cut)", "cut twice")


def test_class_cut_at_a_constant_instead_of_the_input_is_rejected(tmp_path, base):
    """The lemma's v1 is an input: it instantiates to an input, never to another term."""
    k, cut = _class_cut(base)
    e, a = _sides(S, shard(P, "B", "dp"), _ex(V2))
    cut["lhs"], cut["rhs"] = k.node(e), k.node(a)
    k.step(cut)
    _rejected(tmp_path, k.c, "(cut)", "differ in op")


# -- a real certificate: prove makes its layers' cuts class cuts ---------------------------------
@pytest.fixture(scope="module")
def real():
    import spec_lang

    r = prove(spec_lang.load(ROOT / "examples" / "llama_debug_megatron.py"))
    assert r.verdict == "EQUIVALENT"
    return certificate_of(r)


def test_real_certificate_holds_one_lemma_per_class(tmp_path, real):
    cuts = [s for s in real["steps"] if s["kind"] == "cut"]
    users: dict[int, int] = {}
    for s in cuts:
        users[s["lemma"]] = users.get(s["lemma"], 0) + 1
    assert len(cuts) >= 10 and max(users.values()) >= 2   # one lemma serves several layers
    assert sum(s["kind"] == "rename" for s in real["steps"]) == 0
    r = _check(tmp_path, real)
    assert (r.verdict, r.checked) == ("EQUIVALENT", len(real["obligations"]))


def test_class_cuts_spelled_out_for_coq_are_accepted_too(tmp_path, real):
    """proofs/coq_cuts.py: each class cut becomes a rename of the class lemma and an exact cut;
    the result is a certificate the checker accepts, with one rename per class cut."""
    out = expand_class_cuts(real)
    n_cut = sum(s["kind"] == "cut" for s in real["steps"])
    renames = [s for s in out["steps"] if s["kind"] == "rename"]
    assert 1 <= len(renames) <= n_cut
    assert len(out["steps"]) == len(real["steps"]) + len(renames)
    assert len(out["nodes"]) > len(real["nodes"])
    for k, st in enumerate(out["steps"]):
        if st["kind"] == "cut":
            lem = out["steps"][st["lemma"]]
            assert lem["kind"] != "cut"
    assert expand_class_cuts(out) is out          # nothing left to spell out
    r = _check(tmp_path, out)
    assert (r.verdict, r.checked) == ("EQUIVALENT", len(real["obligations"]))


def _other_layers_premise(c):
    """A class cut given the premise of the same cut point of another layer."""
    cuts = [(k, s) for k, s in enumerate(c["steps"]) if s["kind"] == "cut"]
    for k, s in cuts:
        for j, t in cuts:
            if j != k and t["lemma"] == s["lemma"] and t["cuts"][0]["premise"] != \
                    s["cuts"][0]["premise"]:
                s["cuts"][0]["premise"] = t["cuts"][0]["premise"]
                return k
    raise AssertionError("no two cuts of one class")


def _other_layers_goal(c):
    """A class cut stating another layer's goal on its plan side."""
    cuts = [(k, s) for k, s in enumerate(c["steps"]) if s["kind"] == "cut"]
    for k, s in cuts:
        for j, t in cuts:
            if j != k and t["lemma"] == s["lemma"] and t["rhs"] != s["rhs"]:
                s["rhs"] = t["rhs"]
                return k
    raise AssertionError("no two cuts of one class")


@pytest.mark.parametrize("edit", [_other_layers_premise, _other_layers_goal])
def test_tampered_real_class_cut_is_rejected(tmp_path, real, edit):
    c = copy.deepcopy(real)
    k = edit(c)
    msg = _rejected(tmp_path, c)
    assert msg.startswith(f"step {k} (cut)"), msg
