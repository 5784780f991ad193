"""The checker's ``cut`` step (``docs/certificate.md``, "Soundness of cut"): ``lhs == rhs``
from a lemma proved over fresh ``cut:`` variables and one premise per cut point. Every cut
variable is an unconstrained real INPUT with the dims of the global spec tensor it stands for;
the lemma's two sides, instantiated at the spec and plan terms and with their other inputs
renamed bijectively, must be exactly the step's ``lhs`` and ``rhs``: one lemma per layer
class serves every layer of the class (issue 14 item 2), checked by one walk per instance
that matches the lemma against the goal (the checker adds no node). Part of the checker's
trusted base (``docs/trusted-base.md``); ``chk`` is :class:`proofs.checker._Checker`.

Raises:
    CertificateError: the first condition that fails, in one line.
    MalformedCertificate: a cut point that is not ``{spec, plan, var, embed, premise}``.
"""

from __future__ import annotations

from typing import Any

from proofs.checker_load import CUT_KEYS, CUT_PREFIX, _fail
from proofs.errors import MalformedCertificate


def _is_cut_name(name: Any) -> bool:
    return isinstance(name, str) and name.startswith(CUT_PREFIX)


def _dims_str(dims: Any) -> str:
    return "(" + ", ".join(n + "".join("/" + a for a in s) for n, s in dims) + ")"


def check_cut(chk: Any, where: str, k: int, st: dict[str, Any], lhs: int, rhs: int
              ) -> None:
    """``lhs == rhs`` from a lemma over fresh variables (its layer class's, other inputs renamed
    bijectively) and one premise per cut point (docs/certificate.md, "Cut steps")."""
    cuts = st.get("cuts")
    if not isinstance(cuts, list) or not cuts:
        raise _fail(f"{where}: no cut points")
    free = chk.cut_free()
    for side, n in (("lhs", lhs), ("rhs", rhs)):
        if not free[n]:
            raise _fail(f"{where}: {side} node {n} mentions a {CUT_PREFIX} variable")
    nodes = chk.t.nodes
    to_spec: dict[int, int] = {}     # var -> spec node
    to_plan: dict[int, int] = {}     # embed -> plan node
    names: set[str] = set()
    for h, c in enumerate(cuts):
        w = f"{where} cut {h}"
        if not isinstance(c, dict) or set(c) != CUT_KEYS:
            raise MalformedCertificate(f"{w} is not {{spec, plan, var, embed, premise}}")
        sh, ph = chk.node(c["spec"], w + " spec"), chk.node(c["plan"], w + " plan")
        xh, mh = chk.node(c["var"], w + " var"), chk.node(c["embed"], w + " embed")
        for side, n in (("spec", sh), ("plan", ph)):
            if not free[n]:
                raise _fail(f"{w}: {side} node {n} mentions a {CUT_PREFIX} variable")
        op, _, xat, xdims = nodes[xh]
        if op != "INPUT" or not _is_cut_name(xat[0] if xat else None):
            raise _fail(f"{w}: var node {xh} is not an INPUT named {CUT_PREFIX}...")
        if xat[0] in names:
            raise _fail(f"{w}: var name {xat[0]!r} is used twice in the step")
        names.add(xat[0])
        # The lemma holds for every value of x (an unconstrained real tensor, the same on
        # every rank); it is instantiated at s, so s must be such a value.
        if len(xat) != 3 or xat[2] != "real":
            raise _fail(f"{w}: var {xat[0]!r} has domain "
                        f"{' '.join(map(str, xat[2:])) or 'none'}, not an unconstrained real")
        sdims = nodes[sh][3]
        if xdims != sdims:
            raise _fail(f"{w}: var {xat[0]!r} has dims {_dims_str(xdims)} but spec node "
                        f"{sh} has {_dims_str(sdims)}")
        if any(sh_ for _, sh_ in sdims) or chk.varying[sh]:
            raise _fail(f"{w}: spec node {sh} is sharded or varies over the mesh (a cut "
                        f"variable stands for one global tensor)")
        if sh in to_spec.values():
            raise _fail(f"{w}: spec node {sh} is cut twice")
        if ph in to_plan.values():
            raise _fail(f"{w}: plan node {ph} is cut twice")
        if mh in to_plan:
            raise _fail(f"{w}: embed node {mh} is used twice in the step")
        if dict(nodes[mh][3]) != dict(nodes[ph][3]):
            raise _fail(f"{w}: embed node {mh} and plan node {ph} differ in dims")
        other = _other_input(chk, mh, xh)
        if other is not None:
            what = (f"{CUT_PREFIX} variable" if _is_cut_name(nodes[other][2][0]) else "input")
            raise _fail(f"{w}: embed node {mh} mentions {what} node {other}, not only its var "
                        f"{xh}")
        inst = chk.subst(mh, {xh: sh}, w + " instance")
        q = c["premise"]
        chk.earlier(q, k, w + " premise")
        if (chk.steps[q]["lhs"], chk.steps[q]["rhs"]) != (inst, ph):
            raise _fail(f"{w}: premise step {q} proves node {chk.steps[q]['lhs']} == node "
                        f"{chk.steps[q]['rhs']}, not instance {inst} == plan node {ph}")
        to_spec[xh] = sh
        to_plan[mh] = ph
    s = st.get("lemma")
    chk.earlier(s, k, where + " lemma")
    e, a = chk.steps[s]["lhs"], chk.steps[s]["rhs"]
    ren: dict[str, str] = {}
    back: dict[str, str] = {}
    why = (_instance(chk, e, lhs, to_spec, None, ren, back)
           or _instance(chk, a, rhs, None, to_plan, ren, back))
    if why is not None:
        raise _fail(f"{where}: lemma step {s} (node {e} == node {a}) is not the cut terms "
                    f"{lhs} == {rhs} with each spec / plan node at its var / embed and the "
                    f"inputs renamed bijectively: {why}")
    if chk.dep[s] and any(x != y for x, y in ren.items()):
        raise _fail(f"{where}: lemma step {s} rests on an assumed spec denominator, which a "
                    f"renaming of inputs does not carry")


def _instance(chk: Any, pat: int, tgt: int, to_spec: dict[int, int] | None,
              to_plan: dict[int, int] | None, ren: dict[str, str], back: dict[str, str]
              ) -> str | None:
    """Is node ``tgt`` the lemma side ``pat`` instantiated? On the spec side (``to_spec``) a
    cut var ``x`` stands for its spec node; on the plan side (``to_plan``) an embed node
    stands for its plan node (and a bare cut var is not allowed); every other input is
    renamed by the one bijective renaming ``ren`` / ``back`` (same kind, domain and dims), and
    every other node has the op, attrs (compared with every value's type, nested: ``1`` is not
    ``true``) and dims of its image and its children's images as children. None when it is,
    else the first difference. Two nodes agree in op, attrs (an input's but its name), dims
    and arity exactly when their :func:`signatures` do."""
    nodes = chk.t.nodes
    sig, cutvar = chk.signatures()
    image: dict[int, int] = {}
    stack = [(pat, tgt)]
    pop, push = stack.pop, stack.extend
    while stack:
        p, q = pop()
        if p in image:
            if image[p] != q:
                return f"lemma node {p} stands for both node {image[p]} and node {q}"
            continue
        image[p] = q
        if to_plan is not None and p in to_plan:
            if to_plan[p] != q:
                return f"embed node {p} is at node {q}, not at its plan node {to_plan[p]}"
            continue
        if cutvar[p]:
            if to_spec is None or p not in to_spec:
                return f"cut var node {p} is not one of this step's vars on the spec side"
            if to_spec[p] != q:
                return f"cut var node {p} is at node {q}, not at its spec node {to_spec[p]}"
            continue
        if sig[p] != sig[q]:
            return _difference(chk, p, q)
        op, args, attrs, _ = nodes[p]
        if op == "INPUT":
            tq = nodes[q][2]
            if cutvar[q]:
                return f"input {attrs[0]!r} is at cut var {tq[0]!r}"
            if (ren.setdefault(attrs[0], tq[0]) != tq[0]
                    or back.setdefault(tq[0], attrs[0]) != attrs[0]):
                return f"input {attrs[0]!r} is not renamed consistently"
            continue
        push(zip(args, nodes[q][1]))
    return None


def signatures(table: Any) -> tuple[list[int], list[bool]]:
    """Per node of ``table``: a small integer equal for two nodes exactly when they have the
    same op, dims, arity and attrs (every value with its type, nested: the table's
    ``_akeys``), an ``INPUT``'s attrs without its name; and whether the node is a cut var (an
    ``INPUT`` named ``cut:...``). The checker computes them once per check
    (``_Checker.signatures``)."""
    of: dict[Any, int] = {}
    sig: list[int] = []
    cutvar: list[bool] = []
    akeys = table._akeys   # per node: its attrs with every value's type, nested (kernel.py)
    for i, (op, args, attrs, dims) in enumerate(table.nodes):
        inp = op == "INPUT"
        key = (op, akeys[i][1][1:] if inp else akeys[i], dims, len(args))
        sig.append(of.setdefault(key, len(of)))
        cutvar.append(inp and _is_cut_name(attrs[0] if attrs else None))
    return sig, cutvar


def _difference(chk: Any, p: int, q: int) -> str:
    """Why nodes ``p`` and ``q`` have different signatures, in words."""
    op, args, attrs, dims = chk.t.nodes[p]
    oq, aq, tq, dq = chk.t.nodes[q]
    if op != oq or dims != dq or len(args) != len(aq):
        return f"lemma node {p} and node {q} differ in op, dims or arity"
    if op == "INPUT":
        return f"inputs {attrs[0]!r} and {tq[0]!r} differ in kind or domain"
    return f"lemma node {p} and node {q} differ in attrs"


def _other_input(chk: Any, root: int, var: int) -> int | None:
    """An ``INPUT`` other than ``var`` reachable from ``root``, or None."""
    seen: set[int] = set()
    stack = [root]
    while stack:
        n = stack.pop()
        if n in seen or n == var:
            continue
        seen.add(n)
        if chk.t.nodes[n][0] == "INPUT":
            return n
        stack.extend(chk.t.nodes[n][1])
    return None
