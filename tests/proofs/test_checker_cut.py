"""The checker's ``rename`` and ``cut`` steps (obligation cutting, docs/certificate.md).

A real certificate from ``prove`` supplies the nodes and the auxiliary steps: its goals include
the premise ``SHARD(S) == SHARD(P)`` and the lemma ``SHARD(EXP(x)) == EXP(SHARD(x))`` over a
``cut:`` input ``x``; the tests then point obligations at hand-written ``rename`` / ``cut``
steps and tamper with them one field at a time.
"""

import copy

import pytest

from proofs.certificate import certificate_of, write_certificate
from proofs.checker import check_certificate
from proofs.errors import CertificateError, MalformedCertificate
from proofs.kernel import NodeTable, from_terms
from proofs.prover import prove

from spec_lang.term import DimSpec, Op, term
from terms import SIZES, all_reduce, einsum, inp, mul, problem, row_parallel, shard, unary


def _ex(t):
    return unary(Op.EXP, t)


def _mx(a, b):
    return term(Op.MAXIMUM, (a, b), (), (DimSpec("B"),))


S, P = row_parallel()                       # layer output: spec (B, H), plan all-reduced (B, H)
S2, P2 = row_parallel("x2", "w2")           # an identical layer (reused / rename)
Y, Z, W = inp("y", "B"), inp("z", "B"), inp("w", "B")
SM, PM = mul(W, _mx(Y, Z)), mul(_mx(Z, Y), W)    # proved by smt
XC = inp("cut:0", "B", "H", kind="cut")


@pytest.fixture(scope="module")
def base():
    goals = [("grad:w1", "grad", S, P), ("grad:w2", "grad", S2, P2), ("grad:m", "grad", SM, PM),
             ("grad:e", "grad", _ex(SM), _ex(PM)),
             ("grad:d", "grad", shard(_ex(S), "B", "dp"), _ex(shard(P, "B", "dp"))),
             ("grad:aux_p", "grad", shard(S, "B", "dp"), shard(P, "B", "dp")),
             ("grad:aux_l", "grad", shard(_ex(XC), "B", "dp"), _ex(shard(XC, "B", "dp")))]
    r = prove(problem(goals, SIZES))
    assert r.verdict == "EQUIVALENT"
    c = certificate_of(r)
    assert all(s["kind"] not in ("cut", "rename") for s in c["steps"])
    return c


class Cert:
    """A certificate being edited: add nodes (as spec_lang terms or rows) and steps."""

    def __init__(self, c):
        self.c = copy.deepcopy(c)
        self.t = NodeTable.from_json(self.c["nodes"])
        self.ob = {o["name"]: o for o in self.c["obligations"]}

    def node(self, t) -> int:
        i = from_terms(self.t, [t])[id(t)]
        self.c["nodes"] = self.t.to_json()
        return i

    def row(self, op, args, attrs, dims) -> int:
        i = self.t.add(op, args, attrs, dims)
        self.c["nodes"] = self.t.to_json()
        return i

    def step(self, st) -> int:
        self.c["steps"].append(st)
        return len(self.c["steps"]) - 1

    def proof(self, name) -> int:
        return self.ob[name]["proof"]

    def prove_with(self, name, step, method=None):
        o = self.ob[name]
        o["proof"] = step
        if method:
            o["method"] = method
        o.pop("reuses", None)


def _check(tmp_path, c):
    p = tmp_path / "c.json"
    write_certificate(p, c)
    return check_certificate(p, retrace=False)   # the steps are what these tests edit


def _rejected(tmp_path, c, *needles):
    with pytest.raises(CertificateError) as ei:
        _check(tmp_path, c)
    msg = str(ei.value)
    assert "\n" not in msg
    for n in needles:
        assert n in msg, msg
    return msg


# -- the valid shard-embed cut: grad:d = SHARD(EXP(S)) == EXP(SHARD(P)) --------------------------
def _shard_cut(base):
    """(Cert, cut step dict): grad:d proved by cutting at S / SHARD(P) with var cut:0,
    embed SHARD(cut:0), premise aux_p, lemma aux_l."""
    k = Cert(base)
    s, ph = k.ob["grad:w1"]["expected"], k.ob["grad:aux_p"]["actual"]
    xc = k.node(XC)
    mh = k.node(shard(XC, "B", "dp"))
    cut = {"kind": "cut", "lhs": k.ob["grad:d"]["expected"], "rhs": k.ob["grad:d"]["actual"],
           "lemma": k.proof("grad:aux_l"),
           "cuts": [{"spec": s, "plan": ph, "var": xc, "embed": mh,
                     "premise": k.proof("grad:aux_p")}]}
    return k, cut


def _land(k, cut, name="grad:d", method=None):
    k.prove_with(name, k.step(cut), method)
    return k.c


def test_shard_embed_cut_is_accepted(tmp_path, base):
    k, cut = _shard_cut(base)
    c = _land(k, cut)
    r = _check(tmp_path, c)
    assert (r.verdict, r.checked, r.total) == ("EQUIVALENT", 7, 7)
    assert [s["kind"] for s in c["steps"]].count("cut") == 1


def _identity_cut(base):
    """grad:e = EXP(Sm) == EXP(Pm) cut at Sm / Pm, identity embed, premise the smt step of grad:m,
    lemma refl on EXP(cut:1)."""
    k = Cert(base)
    x1 = inp("cut:1", "B", kind="cut")
    xh, lem = k.node(x1), k.node(_ex(x1))
    cut = {"kind": "cut", "lhs": k.ob["grad:e"]["expected"], "rhs": k.ob["grad:e"]["actual"],
           "lemma": k.step({"kind": "refl", "lhs": lem, "rhs": lem}),
           "cuts": [{"spec": k.ob["grad:m"]["expected"], "plan": k.ob["grad:m"]["actual"],
                     "var": xh, "embed": xh, "premise": k.proof("grad:m")}]}
    return k, cut


def test_identity_embed_cut_with_smt_premise_is_accepted_as_smt(tmp_path, base):
    k, cut = _identity_cut(base)
    c = _land(k, cut, "grad:e", "smt")
    r = _check(tmp_path, c)  # the smt step is reached through the cut's premise
    assert (r.verdict, r.checked) == ("EQUIVALENT", 7)
    assert {o["name"]: o["method"] for o in base["obligations"]}["grad:m"] == "smt"


def test_method_smt_needs_an_smt_step_under_the_cut(tmp_path, base):
    k, cut = _shard_cut(base)
    _rejected(tmp_path, _land(k, cut, "grad:d", "smt"), "grad:d", "method smt but the proof has "
              "no smt step")


def test_deep_terms_are_substituted_without_recursion(tmp_path, base):
    """EXP^3000(S) == EXP^3000(P) cut at S / P: the substitution walks 3000 levels."""
    k = Cert(base)
    s, p = k.ob["grad:w1"]["expected"], k.ob["grad:w1"]["actual"]
    xh = k.node(XC)
    tops = []
    for n in (s, p, xh):
        for _ in range(3000):
            n = k.t.add("EXP", (n,), (), k.t.nodes[n][3])
        tops.append(n)
    k.c["nodes"] = k.t.to_json()
    e, a, lem = tops
    cut = {"kind": "cut", "lhs": e, "rhs": a,
           "lemma": k.step({"kind": "refl", "lhs": lem, "rhs": lem}),
           "cuts": [{"spec": s, "plan": p, "var": xh, "embed": xh, "premise": k.proof("grad:w1")}]}
    k.step(cut)  # not an obligation's proof: the replay checks every step
    assert _check(tmp_path, k.c).verdict == "EQUIVALENT"
    k.c["steps"][-1]["lemma"] = k.proof("grad:w1")
    _rejected(tmp_path, k.c, "lemma step", "not the cut terms")


# -- rename ---------------------------------------------------------------------------------------
def test_rename_of_an_identical_layer_is_accepted(tmp_path, base):
    k = Cert(base)
    o = k.ob["grad:w2"]
    assert o["method"] == "reused"
    st = k.step({"kind": "rename", "lhs": o["expected"], "rhs": o["actual"],
                 "of": k.proof("grad:w1")})
    k.prove_with("grad:w2", st, "rewrite")
    r = _check(tmp_path, k.c)
    assert (r.verdict, r.checked) == ("EQUIVALENT", 7)


def test_rename_two_names_onto_one_is_rejected(tmp_path, base):
    k = Cert(base)
    sm, pm = k.node(mul(W, _mx(Y, Y))), k.node(mul(_mx(Y, Y), W))   # z and y both -> y
    k.step({"kind": "rename", "lhs": sm, "rhs": pm, "of": k.proof("grad:m")})
    _rejected(tmp_path, k.c, "step", "(rename)", "not a bijective renaming", "not renamed "
              "consistently")


def test_rename_to_an_input_of_another_kind_is_rejected(tmp_path, base):
    k = Cert(base)
    x3, w3 = inp("x3", "B", "F", kind="param"), inp("w3", "F", "H")   # x is "data"
    s3 = einsum(("B", "H"), x3, w3)
    p3 = all_reduce(einsum(("B", "H"), shard(x3, "F", "tp"), shard(w3, "F", "tp")), "tp")
    ids = from_terms(k.t, [s3, p3])
    k.c["nodes"] = k.t.to_json()
    k.step({"kind": "rename", "lhs": ids[id(s3)], "rhs": ids[id(p3)], "of": k.proof("grad:w1")})
    _rejected(tmp_path, k.c, "(rename)", "differ in kind or domain")


def test_rename_of_a_later_step_is_rejected(tmp_path, base):
    k = Cert(base)
    o = k.ob["grad:w2"]
    n = len(k.c["steps"])
    k.step({"kind": "rename", "lhs": o["expected"], "rhs": o["actual"], "of": n})
    _rejected(tmp_path, k.c, "not an earlier step")


# -- tampered cut steps: each is rejected with a one-line reason naming the step -----------------
def _var_not_cut_name(k, cut):
    cut["cuts"][0]["var"] = k.node(inp("v", "B", "H", kind="data"))


def _var_reachable_from_lhs(k, cut):
    cut["lhs"] = k.ob["grad:aux_l"]["expected"]


def _spec_mentions_cut_var(k, cut):
    cut["cuts"][0]["spec"] = k.node(XC)


def _var_dims_other_order(k, cut):
    cut["cuts"][0]["var"] = k.node(inp("cut:0", "H", "B", kind="cut"))


def _var_positive(k, cut):
    cut["cuts"][0]["var"] = k.node(inp("cut:0", "B", "H", kind="cut", domain="positive"))


def _spec_sharded(k, cut):
    x = term(Op.INPUT, (), ("cut:0", "cut", "real"), (DimSpec("B", ("dp",)), DimSpec("H")))
    cut["cuts"][0]["var"] = k.node(x)
    cut["cuts"][0]["spec"] = k.ob["grad:aux_p"]["expected"]


def _spec_varies(k, cut):
    cut["cuts"][0]["spec"] = k.node(term(Op.PART, (S,), ("tp",), S.dims))


def _embed_other_cut_var(k, cut):
    other = k.node(shard(inp("cut:z", "B", "H", kind="cut"), "B", "dp"))
    mh = cut["cuts"][0]["embed"]
    cut["cuts"][0]["embed"] = k.row("ADD", (mh, other), (), k.t.nodes[mh][3])


def _embed_other_dims(k, cut):
    cut["cuts"][0]["embed"] = cut["cuts"][0]["var"]


def _premise_other_pair(k, cut):
    cut["cuts"][0]["premise"] = k.proof("grad:aux_l")


def _premise_not_earlier(k, cut):
    cut["cuts"][0]["premise"] = len(k.c["steps"])


def _lemma_other_pair(k, cut):
    cut["lemma"] = k.proof("grad:aux_p")


def _missing_instance_node(k, cut):
    mh = cut["cuts"][0]["embed"]
    cut["cuts"][0]["embed"] = k.row("NEG", (mh,), (), k.t.nodes[mh][3])


def _duplicate_var_name(k, cut):
    cut["cuts"].append(dict(cut["cuts"][0]))


def _spec_cut_twice(k, cut):
    again = dict(cut["cuts"][0])
    again["var"] = k.node(inp("cut:0b", "B", "H", kind="cut"))
    cut["cuts"].append(again)


def _no_cuts(k, cut):
    cut["cuts"] = []


TAMPERED = [
    ("var is not a cut: input", _var_not_cut_name, "is not an INPUT named cut:"),
    ("cut var reachable from lhs", _var_reachable_from_lhs, "lhs node"),
    ("spec node mentions a cut var", _spec_mentions_cut_var, "spec node"),
    ("var dims differ from the spec node's", _var_dims_other_order, "has dims (H, B)"),
    ("var of a constrained domain", _var_positive, "not an unconstrained real"),
    ("spec node sharded", _spec_sharded, "sharded or varies"),
    ("spec node varying over tp", _spec_varies, "sharded or varies"),
    ("embed mentions another cut var", _embed_other_cut_var, "mentions cut: variable node"),
    ("embed dims differ from the plan node's", _embed_other_dims, "differ in dims"),
    ("premise proves another pair", _premise_other_pair, "premise step"),
    ("premise is not an earlier step", _premise_not_earlier, "not an earlier step"),
    ("lemma proves another pair", _lemma_other_pair, "lemma step"),
    ("substituted node missing", _missing_instance_node, "the certificate lacks node NEG"),
    ("duplicate var names", _duplicate_var_name, "used twice"),
    ("spec node cut twice", _spec_cut_twice, "cut twice"),
]


@pytest.mark.parametrize("what,edit,needle", TAMPERED, ids=[t[0] for t in TAMPERED])
def test_tampered_cut_is_rejected(tmp_path, base, what, edit, needle):
    k, cut = _shard_cut(base)
    edit(k, cut)
    msg = _rejected(tmp_path, _land(k, cut), needle)
    assert msg.startswith(f"step {len(k.c['steps']) - 1} (cut)"), msg


def test_cut_without_cut_points_is_malformed(tmp_path, base):
    k, cut = _shard_cut(base)
    _no_cuts(k, cut)
    with pytest.raises(MalformedCertificate, match="schema"):
        _check(tmp_path, _land(k, cut))


def test_cut_point_with_an_extra_key_is_malformed(tmp_path, base):
    k, cut = _shard_cut(base)
    cut["cuts"][0]["note"] = 1
    with pytest.raises(MalformedCertificate):
        _check(tmp_path, _land(k, cut))


# -- a real cut certificate: the debug Llama under Megatron TP x DP (prove cuts at the layer marks)
ROOT = __import__("pathlib").Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def real():
    import spec_lang

    r = prove(spec_lang.load(ROOT / "examples" / "llama_debug_megatron.py"))
    assert r.verdict == "EQUIVALENT"
    return certificate_of(r)


def test_real_cut_certificate_is_accepted(tmp_path, real):
    kinds = [s["kind"] for s in real["steps"]]
    assert kinds.count("cut") >= 10   # class cuts (test_checker_class_cut.py): no renames
    assert any(len(s["cuts"]) >= 2 for s in real["steps"] if s["kind"] == "cut")
    cut_proofs = {o["proof"] for o in real["obligations"]} & \
        {k for k, s in enumerate(real["steps"]) if s["kind"] == "cut"}
    assert cut_proofs  # goals are proved by cut steps
    r = _check(tmp_path, real)
    assert (r.verdict, r.checked, r.total) == ("EQUIVALENT", len(real["obligations"]),
                                               len(real["obligations"]))


def _cut_steps(c):
    return [(k, s) for k, s in enumerate(c["steps"]) if s["kind"] == "cut"]


def _swap_premise(c):
    (k, s), = [(k, s) for k, s in _cut_steps(c) if len(s["cuts"]) >= 2][:1]
    a, b = s["cuts"][0], s["cuts"][1]
    a["premise"], b["premise"] = b["premise"], a["premise"]
    return k


def _other_var(c):
    """Another cut variable of the same dims (cut:layers.1 for cut:layers.0)."""
    dims = lambda n: c["nodes"][n][3]  # noqa: E731
    k, s = next((k, s) for k, s in _cut_steps(c) if s["cuts"][0]["var"] != s["cuts"][0]["embed"])
    mine = s["cuts"][0]["var"]
    s["cuts"][0]["var"] = next(h["var"] for _, t in _cut_steps(c) for h in t["cuts"]
                               if h["var"] != mine and dims(h["var"]) == dims(mine))
    return k


def _embed_is_var(c):
    k, s = next((k, s) for k, s in _cut_steps(c) if s["cuts"][0]["embed"] != s["cuts"][0]["var"])
    s["cuts"][0]["embed"] = s["cuts"][0]["var"]
    return k


def _drop_cut_point(c):
    (k, s), = [(k, s) for k, s in _cut_steps(c) if len(s["cuts"]) >= 2][:1]
    s["cuts"].pop()
    return k


def _lemma_of_another_cut(c):
    (k, s), (_, t) = _cut_steps(c)[-2:]
    s["lemma"] = t["lemma"]
    return k


def _rename_of_another_step(c):
    from proofs.coq_cuts import expand_class_cuts

    c.update(expand_class_cuts(c))   # the class cuts as rename + exact cut
    k, s = next((k, s) for k, s in enumerate(c["steps"]) if s["kind"] == "rename")
    s["of"] = next(j for j in range(k) if c["steps"][j]["kind"] == "rule"
                   and (c["steps"][j]["lhs"], c["steps"][j]["rhs"])
                   != (c["steps"][s["of"]]["lhs"], c["steps"][s["of"]]["rhs"]))
    return k


REAL_TAMPERED = [("premises swapped", _swap_premise), ("another cut's var", _other_var),
                 ("embed replaced by the var", _embed_is_var),
                 ("a cut point dropped", _drop_cut_point),
                 ("another goal's lemma", _lemma_of_another_cut),
                 ("rename of another step", _rename_of_another_step)]


@pytest.mark.parametrize("what,edit", REAL_TAMPERED, ids=[t[0] for t in REAL_TAMPERED])
def test_tampered_real_cut_certificate_is_rejected(tmp_path, real, what, edit):
    c = copy.deepcopy(real)
    k = edit(c)
    assert c != real
    msg = _rejected(tmp_path, c)
    assert msg.startswith(f"step {k} ({c['steps'][k]['kind']})"), msg
