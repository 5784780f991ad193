"""The checker's ``cut`` step (``docs/certificate.md``, "Soundness of cut"): ``lhs == rhs``
from a lemma proved over fresh ``cut:`` variables and one premise per cut point. Every cut
variable is an unconstrained real INPUT with the dims of the global spec tensor it stands for;
the lemma's two sides, instantiated at the spec and plan terms, must be exactly the step's
``lhs`` and ``rhs`` (looked-up nodes only: the checker adds no node). Part of the checker's
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
    """``lhs == rhs`` from a lemma over fresh variables and one premise per cut point
    (docs/certificate.md, "Soundness of cut")."""
    cuts = st.get("cuts")
    if not isinstance(cuts, list) or not cuts:
        raise _fail(f"{where}: no cut points")
    free = chk.cut_free()
    for side, n in (("lhs", lhs), ("rhs", rhs)):
        if not free[n]:
            raise _fail(f"{where}: {side} node {n} mentions a {CUT_PREFIX} variable")
    nodes = chk.t.nodes
    to_var: dict[int, int] = {}
    to_embed: dict[int, int] = {}
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
        if sh in to_var:
            raise _fail(f"{w}: spec node {sh} is cut twice")
        if ph in to_embed:
            raise _fail(f"{w}: plan node {ph} is cut twice")
        if dict(nodes[mh][3]) != dict(nodes[ph][3]):
            raise _fail(f"{w}: embed node {mh} and plan node {ph} differ in dims")
        other = _other_cut_var(chk, mh, xh)
        if other is not None:
            raise _fail(f"{w}: embed node {mh} mentions {CUT_PREFIX} variable node {other}, "
                        f"not only its var {xh}")
        inst = chk.subst(mh, {xh: sh}, w + " instance")
        q = c["premise"]
        chk.earlier(q, k, w + " premise")
        if (chk.steps[q]["lhs"], chk.steps[q]["rhs"]) != (inst, ph):
            raise _fail(f"{w}: premise step {q} proves node {chk.steps[q]['lhs']} == node "
                        f"{chk.steps[q]['rhs']}, not instance {inst} == plan node {ph}")
        to_var[sh] = xh
        to_embed[ph] = mh
    e2 = chk.subst(lhs, to_var, where + " lemma lhs")
    a2 = chk.subst(rhs, to_embed, where + " lemma rhs")
    s = st.get("lemma")
    chk.earlier(s, k, where + " lemma")
    if (chk.steps[s]["lhs"], chk.steps[s]["rhs"]) != (e2, a2):
        raise _fail(f"{where}: lemma step {s} proves node {chk.steps[s]['lhs']} == node "
                    f"{chk.steps[s]['rhs']}, not the cut terms {e2} == {a2}")

def _other_cut_var(chk: Any, root: int, var: int) -> int | None:
    """A ``cut:`` INPUT other than ``var`` reachable from ``root``, or None."""
    free = chk.cut_free()
    seen: set[int] = set()
    stack = [root]
    while stack:
        n = stack.pop()
        if n in seen or free[n] or n == var:
            continue
        seen.add(n)
        if chk.t.nodes[n][0] == "INPUT":
            return n
        stack.extend(chk.t.nodes[n][1])
    return None
