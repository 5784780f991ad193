"""Obligation cutting: prove each layer once, over a fresh input, and reuse it for every layer.

A goal such as ``grad:layers.70.attn.wq`` is, as a term, the whole program: the forward through
layers 0..70, the loss, and the backward from the head down to layer 70. Proving it whole costs
time linear in the depth, for every goal. Instead, at every *cut point* (a value both traces mark
under one name: the residual stream at a layer boundary (``ops.layer_boundary``), its adjoint,
a gradient handed to the optimizer, the squared gradient norm), the plan's term ``p_h`` is
replaced by its placement embedding ``E_h(X_h)`` of a fresh input ``X_h`` and the spec's term
``s_h`` by ``X_h``. What is left of a goal ``e == a`` is its *lemma*
``e[s_h := X_h] == a[p_h := E_h(X_h)]``: one layer's worth of term. Each cut needs its *premise*
``E_h(s_h) == p_h``, itself proved by cutting strictly below it. Lemmas of identical layers are
renamings of each other (``layers.3.*`` -> ``layers.4.*``, ``cut:layers.3`` -> ``cut:layers.4``)
and are proved once (:mod:`proofs.obligations`), so proof cost is flat in the number of identical
layers.

Soundness (the ``cut`` certificate step, checked by :mod:`proofs.checker`): the lemma holds for
every value of every input, in particular at ``X_h := s_h`` (the ``X_h`` are fresh: no goal term
mentions an input named ``cut:...``); that instance is ``e == a[p_h := E_h(s_h)]``, and the
premises say each replaced subterm equals what replaces it on every rank, so ``a`` has the same
value (congruence). ``docs/verifier-internals.md``, "Obligation cutting".

The embedding ``E_h`` comes from the plan term's type: one ``SHARD(d, a)`` per mesh axis ``a``
sharding dim ``d``, outermost first (Replicate is the identity). A backward cut (the loss's
adjoint at a boundary) uses ``c * E_h`` with one exact constant ``c`` for every backward cut: a
plan whose local loss is a fixed multiple of its share of the spec's loss has adjoints ``c``
times the spec's. A cut whose premise does not hold (a Partial boundary, a wrong ``c``) is found
by the refuter on the small lemmas and dropped; cutting only ever changes how a goal is proved,
never what is proved.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from spec_lang.term import DimSpec, Op, Term, term, walk

__all__ = ["CUT_PREFIX", "Cut", "Obligation", "Substitution", "build_cuts", "cut_obligations",
           "premise_obligations", "premise_uses", "input_permutes"]

CUT_PREFIX = "cut:"


@dataclass
class Cut:
    """One cut point: ``p`` (plan) is ``embed`` at ``var := s`` (spec) on every rank."""

    name: str
    kind: str            # "forward" | "backward" | "output"
    spec: Term
    plan: Term
    var: Term            # INPUT("cut:<name>", "cut", "real") with the spec term's dims
    embed: Term          # E(var), the plan term's type
    inst: Term           # E(spec)


@dataclass
class Obligation:
    """A lemma to prove: ``expected == actual`` with cut inputs; ``of`` is the goal or the
    cut (``premise:<name>``) it stands for; ``uses`` the cuts whose premises it needs."""

    name: str
    of: str
    expected: Term
    actual: Term
    uses: list[str] = field(default_factory=list)
    kind: str = "lemma"
    layer: str | None = None
    site: str = ""
    placement: str = ""


class Substitution:
    """``t[n := m[n]]`` for every mapped node ``n`` (a mapped node is replaced, not entered),
    memoised across calls and without recursion (terms are thousands of levels deep)."""

    def __init__(self, mapping: Mapping[int, Term]):
        self.map = dict(mapping)
        self.memo: dict[int, Term] = {}

    def __call__(self, root: Term) -> Term:
        memo, mp = self.memo, self.map
        if id(root) in mp:
            return mp[id(root)]
        stack: list[tuple[Term, bool]] = [(root, False)]
        while stack:
            t, ready = stack.pop()
            if id(t) in memo:
                continue
            if id(t) in mp:
                memo[id(t)] = mp[id(t)]
                continue
            if not ready:
                stack.append((t, True))
                stack.extend((c, False) for c in t.args if id(c) not in memo)
                continue
            args = tuple(memo[id(c)] for c in t.args)
            memo[id(t)] = t if all(x is y for x, y in zip(args, t.args)) else \
                term(t.op, args, t.attrs, t.dims)
        return memo[id(root)]

    def below(self, t: Term) -> Term:
        """``t`` rebuilt from its substituted children (``t`` itself is not replaced)."""
        args = tuple(self(c) for c in t.args)
        return t if all(x is y for x, y in zip(args, t.args)) else term(t.op, args, t.attrs,
                                                                        t.dims)


def _var(name: str, dims: tuple[DimSpec, ...]) -> Term:
    return term(Op.INPUT, (), (CUT_PREFIX + name, "cut", "real"), dims)


def _embed(x: Term, plan_dims: tuple[DimSpec, ...], factor: Fraction,
           permutes: Mapping[str, Any] | None = None) -> Term | None:
    """``factor * SHARD(...SHARD(PERMUTE(x, d, perm), d, a0)..., d, a1)`` for the plan term's
    type, or None when the types do not correspond (other dim names, pseudo-shards of CHUNK).
    ``permutes``: dim -> the one block order the plan applies to that dim of its inputs
    (context parallelism's load-balanced chunks), applied to a dim the plan shards."""
    spec_names = sorted(d.name for d in x.dims)
    if any(d.shards for d in x.dims) or sorted(d.name for d in plan_dims) != spec_names:
        return None
    cur = x
    for d in plan_dims:
        if d.shards and permutes and d.name in permutes:
            cur = term(Op.PERMUTE, (cur,), permutes[d.name], cur.dims)
    for d in plan_dims:
        for a in d.shards:
            if a.startswith("#"):
                return None
            dims = tuple(DimSpec(s.name, s.shards + (a,)) if s.name == d.name else s
                         for s in cur.dims)
            cur = term(Op.SHARD, (cur,), (d.name, a), dims)
    if factor != 1:
        c = term(Op.CONST, (), (factor,), ())
        cur = term(Op.MUL, (c, cur), (), cur.dims)
    return cur


def input_permutes(goals: Sequence[Any]) -> dict[str, Any]:
    """dim -> ``PERMUTE`` attrs, for each dim the plan permutes with exactly one block order."""
    seen: dict[str, set] = {}
    for t in walk([g.actual for g in goals]):
        if t.op is Op.PERMUTE:
            seen.setdefault(str(t.attrs[0]), set()).add(t.attrs)
    return {d: next(iter(v)) for d, v in seen.items() if len(v) == 1}


def build_cuts(points: Sequence[Any], *, backward_factor: Fraction = Fraction(1),
               drop: Iterable[str] = (), permutes: Mapping[str, Any] | None = None
               ) -> list[Cut]:
    """Cuts from ``Problem.cut_points``: one per distinct plan node and spec node (the first
    name wins), skipping the names in ``drop`` and points whose types do not correspond.
    Output cuts (gradients, norms: names with a ``:``) come from the same marks."""
    drop = set(drop)
    cuts: list[Cut] = []
    seen_p: set[int] = set()
    seen_s: set[int] = set()
    # one node is often marked twice: block l's output ``layers.l.out`` is block l+1's input
    # ``layers.{l+1}``. Name forward cuts by the block input and backward cuts by the block
    # output, so that every lemma of block l mentions layer index l only (proofs/obligations.py
    # then groups the layers in one pass).
    best: dict[tuple[str, int], Any] = {}
    for pt in points:
        k = (pt.kind, id(pt.plan))
        if k not in best or _prefer(pt) < _prefer(best[k]):
            best[k] = pt
    names: set[str] = set()
    for pt in points:
        if best[(pt.kind, id(pt.plan))] is not pt:
            continue
        name = pt.name + (":adj" if pt.kind == "backward" else "")
        if name in drop or name in names or id(pt.plan) in seen_p or id(pt.spec) in seen_s:
            continue   # one cut per name: premises and cut inputs are keyed by it (adv: a mark
            # named 'v:adj' beside the backward cut of a mark 'v')
        if pt.plan.op is Op.INPUT or pt.spec.op is Op.INPUT:
            continue   # nothing to cut below an input
        var = _var(name, pt.spec.dims)
        emb = _embed(var, pt.plan.dims, backward_factor if pt.kind == "backward" else Fraction(1),
                     permutes)
        if emb is None:
            continue
        inst = Substitution({id(var): pt.spec})(emb)
        kind = "output" if ":" in pt.name and pt.kind == "forward" else pt.kind
        cuts.append(Cut(name, kind, pt.spec, pt.plan, var, emb, inst))
        names.add(name)
        seen_p.add(id(pt.plan))
        seen_s.add(id(pt.spec))
    return cuts


def _prefer(pt: Any) -> int:
    out = pt.name.endswith(".out")
    return int(out) if pt.kind == "forward" else int(not out)


class _Obligations:
    """Lemmas and premises over one set of cuts: the two substitutions (spec nodes by cut
    variables, plan nodes by embeddings) and the cuts below each node, memoised across every
    obligation built (they share nodes)."""

    def __init__(self, cuts: Sequence[Cut]):
        self.s_spec = Substitution({id(c.spec): c.var for c in cuts})
        self.s_plan = Substitution({id(c.plan): c.embed for c in cuts})
        self.by_var = {id(c.var): c.name for c in cuts}
        self.by_name = {c.name: c for c in cuts}
        self.below: dict[int, frozenset[str]] = {}

    def uses(self, *roots: Term) -> list[str]:
        """Cuts whose input occurs below ``roots`` (memoised per node: lemmas share nodes)."""
        below, by_var, empty = self.below, self.by_var, frozenset()
        stack: list[tuple[Term, bool]] = [(r, False) for r in roots]
        while stack:
            t, ready = stack.pop()
            if id(t) in below:
                continue
            if not ready:
                stack.append((t, True))
                stack.extend((c, False) for c in t.args if id(c) not in below)
                continue
            if id(t) in by_var:
                below[id(t)] = frozenset((by_var[id(t)],))
                continue
            sets = {below[id(c)] for c in t.args}
            sets.discard(empty)
            below[id(t)] = empty if not sets else sets.pop() if len(sets) == 1 else \
                frozenset().union(*sets)
        return sorted(frozenset().union(*(below[id(r)] for r in roots)))

    def lemma(self, g: Any, whole: bool) -> Obligation:
        """Goal ``g``'s lemma: its terms with the cut nodes replaced (``whole``: kept)."""
        e, a = (g.expected, g.actual) if whole else (self.s_spec(g.expected),
                                                     self.s_plan(g.actual))
        return Obligation("lemma:" + g.name, g.name, e, a, self.uses(e, a), kind=g.kind,
                          layer=g.layer, site=g.site, placement=g.placement)

    def premise(self, n: str, whole: bool) -> Obligation:
        """Cut ``n``'s premise ``embed[var := spec] == plan``, cut below both sides
        (``whole``: the whole terms ``E(s) == p``)."""
        c = self.by_name[n]
        if whole:
            e, a = c.inst, c.plan
        else:
            e = Substitution({id(c.var): self.s_spec.below(c.spec)})(c.embed)
            a = self.s_plan.below(c.plan)
        return Obligation("premise:" + n, "premise:" + n, e, a, self.uses(e, a),
                          kind="premise", layer=_layer(n))


def cut_obligations(goals: Sequence[Any], cuts: Sequence[Cut], *, uncut: Iterable[str] = (),
                    whole: Iterable[str] = ()
                    ) -> tuple[dict[str, Obligation], dict[str, Obligation]]:
    """The lemma of every goal (``uncut`` goals keep their whole terms) and the premise lemma of
    every cut a lemma uses (transitively); the premises of the cuts named in ``whole`` are their
    whole terms ``E(s) == p`` (a value another lemma cuts at, proved without cutting below it:
    e.g. a value whose plan term does not pass through the plan nodes of the cuts below it).
    Returns ``(goal lemmas by goal name, premise lemmas by
    cut name)``."""
    uncut = set(uncut)
    whole = set(whole)
    b = _Obligations(cuts)
    lemmas = {g.name: b.lemma(g, g.name in uncut) for g in goals}
    premises: dict[str, Obligation] = {}
    todo = [n for ob in lemmas.values() for n in ob.uses]
    while todo:
        n = todo.pop()
        if n in premises:
            continue
        ob = premises[n] = b.premise(n, n in whole)
        todo.extend(u for u in ob.uses if u not in premises)
    return lemmas, premises


def premise_obligations(cuts: Sequence[Cut], names: Iterable[str]) -> dict[str, Obligation]:
    """The premises (cut below, as :func:`cut_obligations` builds them) of the cuts ``names``
    alone, without any goal's lemma: what finding the backward cuts' factor needs
    (``proofs/phases/cutting.py``)."""
    b = _Obligations(cuts)
    return {n: b.premise(n, False) for n in names}


def premise_uses(cuts: Sequence[Cut], names: Iterable[str]) -> dict[str, list[str]]:
    """``{name: premise_obligations(cuts, [name])[name].uses}`` without building the premises:
    the cuts whose node is reached from the children of the cut's spec node (over spec nodes)
    or of its plan node (over plan nodes) before any other cut node, which is where the
    premise's substitutions put cut inputs. Finding the topmost backward cuts
    (``proofs/phases/cutting.py``) needs only these names, not the premises' terms (issue 14:
    building every backward premise cost ~1 s on the 405B)."""
    spec = {id(c.spec): c.name for c in cuts}
    plan = {id(c.plan): c.name for c in cuts}
    by_name = {c.name: c for c in cuts}
    below_s: dict[int, frozenset[str]] = {}
    below_p: dict[int, frozenset[str]] = {}
    return {n: sorted(_cuts_under(by_name[n].spec.args, spec, below_s)
                      | _cuts_under(by_name[n].plan.args, plan, below_p)) for n in names}


def _cuts_under(roots: Sequence[Term], stop: Mapping[int, str],
                below: dict[int, frozenset[str]]) -> frozenset[str]:
    """Names in ``stop`` of the nodes reached from ``roots`` without passing through another
    node of ``stop`` (``below``: a memo per node, shared between calls with the same
    ``stop``); iterative, terms are thousands of levels deep."""
    empty: frozenset[str] = frozenset()
    stack: list[tuple[Term, bool]] = [(r, False) for r in roots]
    while stack:
        t, ready = stack.pop()
        if id(t) in below:
            continue
        if id(t) in stop:
            below[id(t)] = frozenset((stop[id(t)],))
            continue
        if not ready:
            stack.append((t, True))
            stack.extend((c, False) for c in t.args if id(c) not in below)
            continue
        sets = {below[id(c)] for c in t.args}
        sets.discard(empty)
        below[id(t)] = empty if not sets else sets.pop() if len(sets) == 1 else \
            frozenset().union(*sets)
    return frozenset().union(*(below[id(r)] for r in roots))


def _layer(name: str) -> str | None:
    parts = name.split(":")[-1 if name.startswith("grad") else 0].split(".")
    return ".".join(parts[:2]) if len(parts) >= 2 and parts[0] in ("layers", "blocks", "h") \
        else None
