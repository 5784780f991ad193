"""Adversarial round 51a: forged certificates against the checker's *class cuts* (issue 14 item 2,
``proofs/checker_cut.py`` ``check_cut`` / ``_instance``; ``proofs/coq_cuts.py``).

A class cut instantiates its layer class's lemma: cut vars at their spec nodes, embeds at their
plan nodes, every other input renamed by one bijective renaming. Each test forges one cut step
(hand-built terms as in ``tests/proofs/test_checker_class_cut.py``, or a real certificate) and
asserts the checker's answer. Attempt ids a01..a15 are those of ``ATTEMPTS.md`` "Round 51a".
"""

from __future__ import annotations

import copy
import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "proofs"))

from proofs.certificate import certificate_of, write_certificate  # noqa: E402
from proofs.coq_cuts import expand_class_cuts  # noqa: E402
from proofs.errors import CertificateError  # noqa: E402
from proofs.kernel import NodeTable  # noqa: E402
from proofs.prover import prove  # noqa: E402
from spec_lang import load  # noqa: E402
from spec_lang.term import Op  # noqa: E402
from terms import SIZES, inp, mul, problem, row_parallel, shard, unary  # noqa: E402
from test_checker_cut import Cert, _check  # noqa: E402
from test_checker_cut import _rejected as _rejected_msg  # noqa: E402

PLANS = Path(__file__).parent / "plans" / "round51a"
EXAMPLES = ROOT / "examples"


def _ex(t):
    return unary(Op.EXP, t)


S, P = row_parallel()                       # spec (B, H); plan all-reduced (B, H); S == P
XC = inp("cut:0", "B", "H", kind="cut")
V1, V2, V3 = inp("v1", "B", "H"), inp("v2", "B", "H"), inp("v3", "B", "H")
VP = inp("vp", "B", "H", domain="positive")
VT = inp("vt", "H", "B")                    # v1's dims in the other order


def _sides(x, p, v):
    """``SHARD(EXP(x) * v)`` and ``EXP(p) * SHARD(v)``."""
    return shard(mul(_ex(x), v), "B", "dp"), mul(_ex(p), shard(v, "B", "dp"))


def _sides2(x, p, v, u):
    """``SHARD(EXP(x) * v * u)`` and ``EXP(p) * SHARD(v) * SHARD(u)`` (two renamed inputs)."""
    return (shard(mul(_ex(x), v, u), "B", "dp"),
            mul(_ex(p), shard(v, "B", "dp"), shard(u, "B", "dp")))


@pytest.fixture(scope="module")
def base():
    """A real certificate: premise ``SHARD(S) == SHARD(P)``, ``S == P``, ``EXP(S) == EXP(P)``,
    the lemmas over ``cut:0`` with one (``aux_l``) and two (``aux_2``) other inputs."""
    goals = [("grad:aux_p", "grad", shard(S, "B", "dp"), shard(P, "B", "dp")),
             ("grad:w1", "grad", S, P),
             ("grad:e1", "grad", _ex(S), _ex(P)),
             ("grad:aux_l", "grad", *_sides(XC, shard(XC, "B", "dp"), V1)),
             ("grad:aux_2", "grad", *_sides2(XC, shard(XC, "B", "dp"), V1, V3)),
             ("grad:f", "grad", *_sides(S, shard(P, "B", "dp"), V2))]
    r = prove(problem(goals, SIZES))
    assert r.verdict == "EQUIVALENT"
    return certificate_of(r)


def _cut(k, lhs, rhs, lemma, **over):
    """A cut step ``lhs == rhs`` from step ``lemma``, one cut point (default: x := S, embed
    SHARD(x), plan SHARD(P), premise aux_p), fields replaced by ``over``."""
    c = {"spec": k.node(S), "plan": k.ob["grad:aux_p"]["actual"], "var": k.node(XC),
         "embed": k.node(shard(XC, "B", "dp")), "premise": k.proof("grad:aux_p")}
    c.update(over)
    return {"kind": "cut", "lhs": k.node(lhs) if not isinstance(lhs, int) else lhs,
            "rhs": k.node(rhs) if not isinstance(rhs, int) else rhs, "lemma": lemma,
            "cuts": [c]}


def _rejected(tmp_path, c, *needles):
    """The checker's one-line rejection (printed: ATTEMPTS.md quotes it)."""
    msg = _rejected_msg(tmp_path, c, *needles)
    print("REJECTED:", msg[:400])
    return msg


def _false(k, cut):
    """Put the forged step on the certificate (the replay checks every step)."""
    k.step(cut)
    return k.c


# -- a03..a12: hand-built forgeries ---------------------------------------------------------------
def test_a03_non_injective_renaming_is_rejected(tmp_path, base):
    """v1 and v3 of aux_2 both at v2 (a true instance, but not a bijective renaming)."""
    k = Cert(base)
    e, a = _sides2(S, shard(P, "B", "dp"), V2, V2)
    _rejected(tmp_path, _false(k, _cut(k, e, a, k.proof("grad:aux_2"))), "(cut)",
              "not renamed consistently")


def test_a04_renaming_onto_another_domain_is_rejected(tmp_path, base):
    """real v1 renamed onto a positive input (domain change)."""
    k = Cert(base)
    e, a = _sides(S, shard(P, "B", "dp"), VP)
    _rejected(tmp_path, _false(k, _cut(k, e, a, k.proof("grad:aux_l"))), "(cut)",
              "differ in kind or domain")


def test_a05_renaming_onto_permuted_dims_is_rejected(tmp_path, base):
    """v1 (B, H) renamed onto an input with dims (H, B)."""
    k = Cert(base)
    e, a = _sides(S, shard(P, "B", "dp"), VT)
    _rejected(tmp_path, _false(k, _cut(k, e, a, k.proof("grad:aux_l"))), "(cut)",
              "differ in op, dims or arity")


def test_a06_lemma_input_at_the_spec_node_is_rejected(tmp_path, base):
    """v1 instantiated to the cut point's own spec term S (not an input)."""
    k = Cert(base)
    e, a = _sides(S, shard(P, "B", "dp"), S)
    _rejected(tmp_path, _false(k, _cut(k, e, a, k.proof("grad:aux_l"))), "(cut)",
              "differ in op, dims or arity")


def test_a07_bare_cut_var_on_the_plan_side_is_rejected(tmp_path, base):
    """Lemma ``EXP(x) == EXP(x)`` (refl) claimed as ``EXP(S) == EXP(v2)``: the plan side's x is
    not under its embed."""
    k = Cert(base)
    n = k.node(_ex(XC))
    lem = k.step({"kind": "refl", "lhs": n, "rhs": n})
    _rejected(tmp_path, _false(k, _cut(k, _ex(S), _ex(V2), lem)), "(cut)",
              "is not one of this step's vars on the spec side")


def test_a08_lemma_var_without_a_cut_point_is_rejected(tmp_path, base):
    """The only cut point has another var (cut:9): aux_l's cut:0 has no cut point."""
    k = Cert(base)
    x9 = inp("cut:9", "B", "H", kind="cut")
    e, a = _sides(S, shard(P, "B", "dp"), V2)
    cut = _cut(k, e, a, k.proof("grad:aux_l"), var=k.node(x9), embed=k.node(shard(x9, "B", "dp")))
    _rejected(tmp_path, _false(k, cut), "(cut)", "not one of this step's vars")


def test_a09_identity_embed_is_accepted_and_true(tmp_path, base):
    """embed = var (x at plan P, premise S == P): the class cut of grad:f's terms with
    ``EXP(SHARD(P))`` in place of the plan; a true equation, accepted."""
    k = Cert(base)
    e, a = _sides(S, shard(P, "B", "dp"), V2)
    cut = _cut(k, e, a, k.proof("grad:aux_l"), plan=k.ob["grad:w1"]["actual"],
               embed=k.node(XC), premise=k.proof("grad:w1"))
    k.prove_with("grad:f", k.step(cut), "rewrite")
    assert _check(tmp_path, k.c).verdict == "EQUIVALENT"


def test_a10_one_lemma_node_two_images_across_sides_is_accepted_and_true(tmp_path, base):
    """Lemma refl ``N = SHARD(EXP(x) * v1)`` with embed EXP(x) at plan EXP(P) (premise
    EXP(S) == EXP(P)): ``EXP(x) * v1`` stands for ``EXP(S) * v2`` on the spec side and
    ``EXP(P) * v2`` on the plan side; a true equation, accepted (the walk is per side)."""
    k = Cert(base)
    n = k.node(shard(mul(_ex(XC), V1), "B", "dp"))
    lem = k.step({"kind": "refl", "lhs": n, "rhs": n})
    cut = _cut(k, shard(mul(_ex(S), V2), "B", "dp"), shard(mul(_ex(P), V2), "B", "dp"), lem,
               embed=k.node(_ex(XC)), plan=k.ob["grad:e1"]["actual"],
               premise=k.proof("grad:e1"))
    k.step(cut)
    assert _check(tmp_path, k.c).verdict == "EQUIVALENT"


def test_a11_one_lemma_node_two_images_on_one_side_is_rejected(tmp_path, base):
    """Lemma refl ``v1 * v1`` claimed as ``v2 * v3 == v3 * v2`` (with a vacuous cut point)."""
    k = Cert(base)
    n = k.node(mul(V1, V1))
    lem = k.step({"kind": "refl", "lhs": n, "rhs": n})
    _rejected(tmp_path, _false(k, _cut(k, mul(V2, V3), mul(V3, V2), lem)), "(cut)",
              "stands for both node")


def test_a12_nested_attr_bool_is_not_conflated_with_int(tmp_path, base):
    """RANK_CONST(dp, (1, 2)) in the lemma standing for RANK_CONST(dp, (true, 2)) in the goal:
    round 51a found the walk compared nested attrs with ``==`` (1 == True; harmless there:
    z3 refuses a boolean RANK_CONST value, numerically true is 1). The lead's change: the walk
    compares the kernel's exact attribute keys (every value's type, nested): rejected."""
    k = Cert(base)
    one = k.row("RANK_CONST", (), ("dp", (1, 2)), ())
    tru = k.row("RANK_CONST", (), ("dp", (True, 2)), ())
    v1, v2 = k.node(inp("v1", "B")), k.node(inp("v2", "B"))
    n = k.row("MUL", (one, v1), (), (("B", ()),))
    lem = k.step({"kind": "refl", "lhs": n, "rhs": n})
    lhs = k.row("MUL", (tru, v2), (), (("B", ()),))
    rhs = k.row("MUL", (one, v2), (), (("B", ()),))
    k.step(_cut(k, lhs, rhs, lem))
    _rejected(tmp_path, k.c, "(cut)", "differ in attrs")


# -- a01 / a02: one asymmetric layer (RoPE base 20000 in block 1) grafted onto the good proofs ----
def _cert(plan: Path, tmp_path: Path, name: str) -> dict:
    r = prove(load(plan))
    c = certificate_of(r)
    c["_verdict"] = r.verdict
    return c


def _graft(good: dict, bad: dict) -> tuple[dict, NodeTable, dict[int, int]]:
    """The good certificate's nodes and steps with the bad plan's goal nodes added and its
    obligations (ids remapped), verdict EQUIVALENT, each obligation proved by a class cut: the
    good proof's lemma and cut points, at the bad goal's terms."""
    c = copy.deepcopy(good)
    t = NodeTable.from_json(c["nodes"])
    m: dict[int, int] = {}
    for i, (op, args, attrs, dims) in enumerate(NodeTable.from_json(bad["nodes"]).nodes):
        m[i] = t.add(op, tuple(m[a] for a in args), attrs, dims)
    c["nodes"] = t.to_json()
    gob = {o["name"]: o for o in good["obligations"]}
    obs = []
    for o in bad["obligations"]:
        g = gob[o["name"]]
        st = good["steps"][g["proof"]]
        o = dict(o, expected=m[o["expected"]], actual=m[o["actual"]], method="rewrite")
        o.pop("reason", None)
        c["steps"].append({"kind": "cut", "lhs": o["expected"], "rhs": o["actual"],
                           "lemma": st["lemma"], "cuts": copy.deepcopy(st["cuts"])})
        o["proof"] = len(c["steps"]) - 1
        obs.append(o)
    c["obligations"] = obs
    c.update(verdict="EQUIVALENT", counterexample=None, plan=bad["plan"],
             plan_sha256=bad["plan_sha256"])
    return c, t, m


@pytest.fixture(scope="module")
def theta(tmp_path_factory):
    d = tmp_path_factory.mktemp("theta")
    import importlib

    llama_mod = importlib.import_module("spec_lang.models.llama")
    orig = llama_mod.transformer_block
    good = _cert(EXAMPLES / "llama_debug_megatron.py", d, "good")
    try:
        bad = _cert(PLANS / "llama_theta_l1.py", d, "bad")
    finally:   # the plan file patches the model module of this process
        llama_mod.transformer_block = orig
    assert (good.pop("_verdict"), bad.pop("_verdict")) == ("EQUIVALENT", "NOT EQUIVALENT")
    return good, bad


def _cli(cert: Path, plan: Path) -> subprocess.CompletedProcess:
    code = ("import sys;sys.argv=['check-certificate',sys.argv[1],'--plan',sys.argv[2]];"
            "from proofs.cli import check_main;sys.exit(check_main())")
    return subprocess.run([sys.executable, "-c", code, str(cert), str(plan)], cwd=ROOT,
                          capture_output=True, text=True, timeout=300)


def test_a01_asymmetric_layer_grafted_onto_the_class_lemmas_is_rejected(tmp_path, theta):
    """Every goal of the NOT EQUIVALENT plan class-cut with the good plan's lemma and cut points;
    checked with the re-trace (CLI): exit 4."""
    c, _, _ = _graft(*theta)
    p = tmp_path / "forged.json"
    write_certificate(p, c)
    r = _cli(p, PLANS / "llama_theta_l1.py")
    assert r.returncode == 4, r.stdout + r.stderr
    print("REJECTED:", (r.stdout + r.stderr).strip()[:400])
    assert "(cut)" in r.stdout + r.stderr


def _embed_targets(nodes, pat: int, tgt: int, embeds: set[int]) -> dict[int, int]:
    """Walk lemma side ``pat`` against ``tgt``; the target node at each embed (first seen)."""
    out: dict[int, int] = {}
    stack, seen = [(pat, tgt)], set()
    while stack:
        p, q = stack.pop()
        if (p, q) in seen:
            continue
        seen.add((p, q))
        if p in embeds:
            out.setdefault(p, q)
            continue
        if nodes[p][0] == nodes[q][0] and len(nodes[p][1]) == len(nodes[q][1]):
            stack.extend(zip(nodes[p][1], nodes[q][1]))
    return out


def test_a02_bad_layer_cut_at_its_own_plan_nodes_is_rejected(tmp_path, theta):
    """grad:layers.1.attn.wq: the class cut's plan nodes moved to the bad plan's terms at the
    embeds (so the walk would pass there); the premises still prove the good plan's nodes."""
    c, t, _ = _graft(*theta)
    o = next(o for o in c["obligations"] if o["name"] == "grad:layers.1.attn.wq")
    st = c["steps"][o["proof"]]
    R = c["steps"][st["lemma"]]["rhs"]
    at = _embed_targets(t.nodes, R, st["rhs"], {cp["embed"] for cp in st["cuts"]})
    for cp in st["cuts"]:
        cp["plan"] = at.get(cp["embed"], cp["plan"])
    good = copy.deepcopy(theta[0])
    good["nodes"] = c["nodes"]              # the good certificate, one forged step appended
    good["steps"].append(st)
    msg = _rejected(tmp_path, good, f"step {len(good['steps']) - 1} (cut)")
    assert "premise" in msg or "not at its plan node" in msg or "differ" in msg, msg


# -- a13: a lemma resting on an assumed spec denominator, renamed ----------------------------------
def test_a13_renamed_lemma_resting_on_a_spec_denominator_is_rejected(tmp_path):
    """tests/bugs/plans_denom/spec_denominator.py: grad:b class-cut with grad:a's whole proof
    (which rests on sum(w) != 0) as the lemma, x -> y and a -> b, one trivial cut point."""
    r = prove(load(ROOT / "tests" / "bugs" / "plans_denom" / "spec_denominator.py"))
    c = certificate_of(r)
    ob = {o["name"]: o for o in c["obligations"]}
    a, b = ob["grad:a"], ob["grad:b"]
    cut_a = c["steps"][a["proof"]]
    assert cut_a["kind"] == "cut"
    (cp,) = cut_a["cuts"]
    lem = cp["premise"]                      # grad:a's own proof: expected == actual, dep
    assert (c["steps"][lem]["lhs"], c["steps"][lem]["rhs"]) == (a["expected"], a["actual"])
    c["steps"].append({"kind": "cut", "lhs": b["expected"], "rhs": b["actual"], "lemma": lem,
                       "cuts": [dict(cp)]})
    b["proof"] = len(c["steps"]) - 1
    _rejected(tmp_path, c, "(cut)", "rests on an assumed spec denominator")


# -- a14: a plan that uses layer 0's weight in layer 1, class-cut with the layer-1 instance -------
@pytest.fixture(scope="module")
def real():
    r = prove(load(EXAMPLES / "llama_debug_megatron.py"))
    assert r.verdict == "EQUIVALENT"
    return certificate_of(r)


def test_a14_plan_side_weight_of_another_layer_is_rejected(tmp_path, real):
    """A class cut of a layer-1 goal whose plan side reads ``layers.0.attn.wq`` where the goal
    has ``layers.1.attn.wq`` (a real bug, same kind / domain / dims): the one renaming maps the
    lemma's weight to layers.1 on the spec side, to layers.0 on the plan side."""
    from proofs.coq_cuts import _Rows

    c = copy.deepcopy(real)
    rows = c["nodes"]
    ids = {r[2][0]: i for i, r in enumerate(rows) if r[0] == "INPUT"}
    w0, w1 = ids["layers.0.attn.wq"], ids["layers.1.attn.wq"]
    t = NodeTable.from_json(rows)

    def mentions(n, x):
        seen, stack = set(), [n]
        while stack:
            i = stack.pop()
            if i == x:
                return True
            if i not in seen:
                seen.add(i)
                stack.extend(t.nodes[i][1])
        return False

    k, st = next((k, s) for k, s in enumerate(c["steps"]) if s["kind"] == "cut"
                 and mentions(s["rhs"], w1)
                 and not mentions(c["steps"][s["lemma"]]["rhs"], w1))
    R = _Rows(rows)
    bad_rhs = R.subst(st["rhs"], {w1: w0})
    c["nodes"] = R.rows
    forged = dict(copy.deepcopy(st), rhs=bad_rhs)
    c["steps"].append(forged)
    msg = _rejected(tmp_path, c, f"step {len(c['steps']) - 1} (cut)")
    assert "renamed consistently" in msg or "not at its plan node" in msg, msg


# -- a15: proofs/coq_cuts.py expand_class_cuts --------------------------------------------------
def test_a15_expansion_of_a_valid_class_cut_can_be_no_renaming(tmp_path, base):
    """Lemma refl ``N = EXP(x) * S`` (the spec term S itself also in the lemma), cut x := S with
    identity embed at P (premise S == P): the checker accepts ``EXP(S) * S == EXP(P) * S``.
    ``expand_class_cuts`` spells the cut's own terms as ``lhs[S := x] = EXP(x) * x``, which is no
    renaming of ``N``: the expanded certificate is rejected (a needless failure of the Coq export
    only; the expansion never makes it claim more)."""
    k = Cert(base)
    n = k.node(mul(_ex(XC), S))
    lem = k.step({"kind": "refl", "lhs": n, "rhs": n})
    cut = _cut(k, mul(_ex(S), S), mul(_ex(P), S), lem, plan=k.ob["grad:w1"]["actual"],
               embed=k.node(XC), premise=k.proof("grad:w1"))
    k.step(cut)
    assert _check(tmp_path, k.c).verdict == "EQUIVALENT"
    out = expand_class_cuts(k.c)
    assert out is not k.c
    _rejected(tmp_path, out, "(rename)", "not a bijective renaming")


def test_a15b_expansion_of_a_rejected_dep_class_cut_stays_rejected(tmp_path):
    """a13's forgery spelled out by expand_class_cuts: the rename of the lemma resting on
    sum(w) != 0 is rejected by the Python checker too (the Coq run is behind it)."""
    r = prove(load(ROOT / "tests" / "bugs" / "plans_denom" / "spec_denominator.py"))
    c = certificate_of(r)
    ob = {o["name"]: o for o in c["obligations"]}
    a, b = ob["grad:a"], ob["grad:b"]
    (cp,) = c["steps"][a["proof"]]["cuts"]
    c["steps"].append({"kind": "cut", "lhs": b["expected"], "rhs": b["actual"],
                       "lemma": cp["premise"], "cuts": [dict(cp)]})
    b["proof"] = len(c["steps"]) - 1
    out = expand_class_cuts(c)
    assert sum(s["kind"] == "rename" for s in out["steps"]) >= 2   # the honest ones, and ours
    _rejected(tmp_path, out, "(rename)", "rests on an assumed spec denominator")
