"""``check-certificate``: the small trusted checker of shardproof certificates.

It imports neither egglog, nor ``rewriting``, nor ``proofs.prover``, nor the DSL's tracer, and
never runs the plan file in its own process (a test runs it in a fresh interpreter and
inspects ``sys.modules``). Its trusted base (``docs/trusted-base.md``) is: this module with
:mod:`proofs.checker_load` (format and schema), :mod:`proofs.checker_cut` (the cut step) and
:mod:`proofs.checker_refutation` (the NOT EQUIVALENT replay, the RNG assumption), its own
copy of the rule table (:mod:`proofs.checker_rules`), the node kernel (:mod:`proofs.kernel`,
:mod:`proofs.exact_numbers`), the scalar encoding (:mod:`proofs.smt`) with z3, the rational
identities (:mod:`proofs.cas`), the shape-reduction side conditions
(:mod:`proofs.admissible`, :mod:`proofs.size_literals`), the re-trace (:mod:`proofs.retrace`, :mod:`proofs.isolation`,
:mod:`proofs.problem_data`, with :mod:`proofs.rng` and :mod:`proofs.reduction` for the RNG
obligation), and the DSL's term IR and reference semantics (``spec_lang.term``,
``spec_lang.evaluate``, via :mod:`proofs.replay`) to replay a refutation.

What it checks, in order (the first failure rejects, with a one-line reason):

1. the file is JSON of this format and version, and of the published schema (a node row the
   kernel cannot read is a schema violation too);
2. the node table is hash-consed, topologically ordered, well-typed (shape rules) and valid at
   the binding's sizes (every sharded dim divides, renames and concatenations keep sizes);
3. ``spec_sha256`` / ``plan_sha256`` are the hashes of the obligations' expected / actual terms
   and of the binding (its dims / all of it); the ruleset is the one this checker holds a copy
   of;
4. every step, replayed in order: ``rule`` steps re-instantiate the rule's two sides from the
   substitution, match them against the step's nodes and re-evaluate the guard (a step that
   merges or drops a power must keep both sides defined at the same inputs of the spec's domain,
   from sign facts the checker derives itself, :mod:`proofs.checker_signs`; the spec's assumed
   denominators are checked first and a proof resting on them is never renamed); ``smt`` steps
   *regenerate* the query from the terms at the binding :mod:`proofs.admissible` recomputes
   (``docs/soundness.md``; the recorded one must equal it) and re-run z3 (the stored text must
   also equal it);
   ``rename`` steps are a bijective renaming of inputs of an earlier step; ``cut`` steps
   instantiate a lemma over fresh ``cut:`` variables and rewrite with one premise per cut point
   (looked-up nodes only: the checker adds no node);
5. every obligation's proof step proves exactly ``expected == actual``; reused obligations are
   a bijective renaming of inputs of a proved one;
6. the verdict follows from the obligations (EQUIVALENT only when every one is proved); a NOT
   EQUIVALENT certificate's replay is re-evaluated and every refuted obligation must diverge, at
   a binding the confirmation rule of ``docs/soundness.md`` section 3 allows for its terms;
   an EQUIVALENT certificate with dropout masks records the ``rng:`` assumption (with ``pp > 1``:
   one naming per-stage generators);
7. unless ``--no-retrace``, the plan file hashes to ``plan.sha256`` and re-tracing it in a
   separate clean interpreter (:mod:`proofs.retrace`, started before step 2 and collected
   here) gives the same goals (same names, same term hashes), the same binding and dropout
   records that pass the RNG obligation; without the plan file the certificate is not tied to
   a plan and is rejected.

Constants are parsed by a strict grammar (:mod:`proofs.exact_numbers`); nothing of a
certificate is evaluated. The trusted base is listed in ``docs/trusted-base.md``.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from proofs.checker_cut import _is_cut_name, check_cut, signatures
from proofs.checker_load import STEP_KEYS, _fail, load
from proofs.checker_refutation import _check_refutation, _require_rng_assumption
from proofs.checker_rules import RULES, RULESET, RuleMismatch, instantiate_and_match, varying_table
from proofs.checker_signs import DenominatorError, Signs, assumed_denominators
from proofs.errors import MalformedCertificate
from proofs.kernel import (
    KernelError, KernelMalformed, NodeTable, check_sizes, decode_attr, node_hash_table,
    paused_gc, roots_hash,
    spec_binding, typecheck,
)

__all__ = ["check_certificate", "CheckResult"]


class CheckResult:
    def __init__(self, verdict: str, checked: int, total: int, steps: int, smt: int,
                 retraced: bool):
        self.verdict, self.checked, self.total = verdict, checked, total
        self.steps, self.smt, self.retraced = steps, smt, retraced

    refuted = 0  # refuted obligations whose divergence the replay re-derived
    hashes: list[str] = []  # Merkle hash of every node (the re-trace compares them)

    def summary(self) -> str:
        extra = (", plan re-traced in a separate process" if self.retraced else
                 ", plan not re-traced (--no-retrace): the goals are not tied to a plan "
                 "file")
        if self.refuted:
            extra = f", {self.refuted} refuted goals re-evaluated and diverging" + extra
        return (f"certificate OK: verdict {self.verdict}; {self.checked} of {self.total} "
                f"goals proved and re-checked ({self.steps} steps, {self.smt} z3 "
                f"queries regenerated){extra}")



# -- the checker --------------------------------------------------------------------------------
class _Checker:
    def __init__(self, cert: dict[str, Any], table: NodeTable, smt_timeout_s: float):
        self.cert = cert
        self.t = table
        self.binding: dict[str, int] = dict(cert["binding"])
        self.steps: list[dict[str, Any]] = cert["steps"]
        self.smt_timeout_s = smt_timeout_s
        self.smt_count = 0
        self.varying = varying_table(table)
        self._cut_free: list[bool] | None = None
        self._signatures: tuple[list[int], list[bool]] | None = None   # (class cuts)
        # sign facts (proofs/checker_signs.py): the input domains alone, and with the spec's
        # assumed denominators; dep[k]: step k rests on an assumed denominator
        self.signs_free = Signs(table)
        self.signs_full = self.signs_free
        self.dep: list[bool] = []

    def node(self, i: Any, where: str) -> int:
        if isinstance(i, bool) or not isinstance(i, int) or not 0 <= i < len(self.t):
            raise _fail(f"{where}: {i!r} is not a node id")
        return i

    def replay(self) -> None:
        for k, st in enumerate(self.steps):
            if not isinstance(st, dict) or set(st) != STEP_KEYS.get(st.get("kind"), set()):
                raise MalformedCertificate(f"step {k} is not a step of this format")
            where = f"step {k} ({st.get('kind')})"
            lhs = self.node(st.get("lhs"), where + " lhs")
            rhs = self.node(st.get("rhs"), where + " rhs")
            dep = False
            match st.get("kind"):
                case "refl":
                    if lhs != rhs:
                        raise _fail(f"{where}: refl between different nodes {lhs} and {rhs}")
                case "rule":
                    dep = self.rule(where, st, lhs, rhs)
                case "congr":
                    self.congr(where, k, st, lhs, rhs)
                    dep = any(self.dep[a] for a in st["args"] if a is not None)
                case "trans":
                    chain = st.get("steps")
                    if not isinstance(chain, list) or not chain:
                        raise _fail(f"{where}: empty chain")
                    for s in chain:
                        self.earlier(s, k, where)
                    if self.steps[chain[0]]["lhs"] != lhs or self.steps[chain[-1]]["rhs"] != rhs:
                        raise _fail(f"{where}: chain does not run from node {lhs} to node {rhs}")
                    for a, b in zip(chain, chain[1:]):
                        if self.steps[a]["rhs"] != self.steps[b]["lhs"]:
                            raise _fail(f"{where}: step {a} ends at node {self.steps[a]['rhs']} "
                                        f"but step {b} starts at node {self.steps[b]['lhs']}")
                    dep = any(self.dep[a] for a in chain)
                case "sym":
                    s = st.get("of")
                    self.earlier(s, k, where)
                    if (self.steps[s]["lhs"], self.steps[s]["rhs"]) != (rhs, lhs):
                        raise _fail(f"{where}: step {s} does not prove node {rhs} == node {lhs}")
                    dep = self.dep[s]
                case "smt":
                    dep = self.defined_sides(where, lhs, rhs)
                    self.smt(where, st, lhs, rhs)
                case "cas":
                    from proofs.cas import cas_identity

                    dep = self.defined_sides(where, lhs, rhs)
                    why = cas_identity(self.t, lhs, rhs)
                    if why is not None:
                        raise _fail(f"{where}: nodes {lhs} and {rhs}: {why}")
                case "rename":
                    s = st.get("of")
                    self.earlier(s, k, where)
                    if self.dep[s]:
                        raise _fail(f"{where}: step {s} rests on an assumed spec denominator, "
                                    f"which a renaming of inputs does not carry")
                    src = (self.steps[s]["lhs"], self.steps[s]["rhs"])
                    why = _renaming_ok(self.t, src, (lhs, rhs))
                    if why is not None:
                        raise _fail(f"{where}: not a bijective renaming of inputs of step {s} "
                                    f"(node {src[0]} == node {src[1]}): {why}")
                case "cut":
                    self.cut(where, k, st, lhs, rhs)
                    dep = self.dep[st["lemma"]] or any(self.dep[c["premise"]] for c in st["cuts"])
                case other:
                    raise _fail(f"{where}: unknown step kind {other!r}")
            self.dep.append(dep)

    def defined_sides(self, where: str, lhs: int, rhs: int) -> bool:
        """Both sides of a cas / smt step are defined on the spec's domain (an identity of
        rational functions holds where its denominators are nonzero). Returns whether that
        rests on an assumed spec denominator."""
        for signs, dep in ((self.signs_free, False), (self.signs_full, True)):
            if signs.defined(lhs) and signs.defined(rhs):
                return dep
        raise _fail(f"{where}: nodes {lhs} and {rhs}: a denominator (or radicand, log "
                    f"argument) is not shown nonzero on the spec's domain")
    # -- obligation cutting -------------------------------------------------------------------
    def signatures(self) -> tuple[list[int], list[bool]]:
        """:func:`proofs.checker_cut.signatures` of the table, once."""
        if self._signatures is None:
            self._signatures = signatures(self.t)
        return self._signatures

    def cut_free(self) -> list[bool]:
        """Per node: no ``INPUT`` named ``cut:...`` is reachable from it (once, bottom-up)."""
        if self._cut_free is None:
            out: list[bool] = []
            for op, args, attrs, _ in self.t.nodes:
                if op == "INPUT":
                    out.append(not _is_cut_name(attrs[0] if attrs else None))
                else:
                    out.append(all(out[c] for c in args))
            self._cut_free = out
        return self._cut_free

    def subst(self, root: int, m: Mapping[int, int], where: str) -> int:
        """The node ``root[m]`` (a node in ``m`` is replaced by its image; any other node by the
        node of the same op, attrs and dims over the substituted children), looked up in the
        table: the checker adds no node, a missing one is a rejection. Iterative post-order
        (terms are thousands of levels deep); a node with a smaller id than every key of ``m``
        cannot contain one (children precede parents) and is itself."""
        if not m:
            return root
        low = min(m)
        memo: dict[int, int] = {}
        nodes = self.t.nodes
        stack = [root]
        while stack:
            n = stack[-1]
            if n in memo:
                stack.pop()
                continue
            if n in m:
                memo[n] = m[n]
                stack.pop()
                continue
            if n < low:
                memo[n] = n
                stack.pop()
                continue
            op, args, attrs, dims = nodes[n]
            todo = [c for c in args if c not in memo]
            if todo:
                stack.extend(todo)
                continue
            stack.pop()
            new = tuple(memo[c] for c in args)
            if new == args:
                memo[n] = n
                continue
            j = self.t.find_over(n, new)
            if j is None:
                raise _fail(f"{where}: the certificate lacks node {op}{list(new)} (node {n} with "
                            f"its children substituted)")
            memo[n] = j
        return memo[root]

    def cut(self, where: str, k: int, st: dict[str, Any], lhs: int, rhs: int) -> None:
        check_cut(self, where, k, st, lhs, rhs)   # proofs/checker_cut.py

    def earlier(self, s: Any, k: int, where: str) -> None:
        if isinstance(s, bool) or not isinstance(s, int) or not 0 <= s < k:
            raise _fail(f"{where}: refers to step {s!r}, not an earlier step")

    def congr(self, where: str, k: int, st: dict[str, Any], lhs: int, rhs: int) -> None:
        op1, a1, at1, _ = self.t.nodes[lhs]
        op2, a2, at2, _ = self.t.nodes[rhs]
        if op1 != op2:
            raise _fail(f"{where}: nodes {lhs} ({op1}) and {rhs} ({op2}) differ in op")
        if at1 != at2 or [type(x) for x in at1] != [type(x) for x in at2]:
            raise _fail(f"{where}: nodes {lhs} and {rhs} differ in attrs")
        if dict(self.t.nodes[lhs][3]) != dict(self.t.nodes[rhs][3]):
            raise _fail(f"{where}: nodes {lhs} and {rhs} differ in dims")
        args = st.get("args")
        if not isinstance(args, list) or len(args) != len(a1) or len(a1) != len(a2):
            raise _fail(f"{where}: args do not match the arity of node {lhs}")
        for j, (s, c1, c2) in enumerate(zip(args, a1, a2)):
            if s is None:
                if c1 != c2:
                    raise _fail(f"{where}: child {j} differs ({c1} vs {c2}) without a proof")
                continue
            self.earlier(s, k, where)
            if (self.steps[s]["lhs"], self.steps[s]["rhs"]) != (c1, c2):
                raise _fail(f"{where}: step {s} does not prove child {j}: node {c1} == node {c2}")

    def rule(self, where: str, st: dict[str, Any], lhs: int, rhs: int) -> bool:
        name = st.get("rule")
        rule = RULES.get(name) if isinstance(name, str) else None
        if rule is None:
            raise _fail(f"{where}: unknown rule {name!r} (not in this checker's {RULESET['name']} "
                        f"{RULESET['version']} table)")
        raw = st.get("subst")
        if not isinstance(raw, dict):
            raise _fail(f"{where}: substitution is not an object")
        subst: dict[str, Any] = {}
        try:
            for key, v in raw.items():
                if isinstance(v, dict) and set(v) == {"node"}:
                    subst[key] = ("node", self.node(v["node"], where + f" subst {key}"))
                elif isinstance(v, dict) and set(v) == {"nodes"} and isinstance(v["nodes"], list):
                    subst[key] = ("nodes", tuple(self.node(x, where + f" subst {key}")
                                                 for x in v["nodes"]))
                else:
                    subst[key] = ("attr", decode_attr(v))
        except KernelError as e:
            raise _fail(f"{where}: substitution: {e}") from None
        try:
            instantiate_and_match(rule, subst, self.t, self.binding, lhs, rhs, self.varying,
                                  self.signs_free)
            return False
        except RuleMismatch as e:
            if self.signs_full is self.signs_free:
                raise _fail(f"{where}: rule {name}: {e}") from None
        try:   # with the spec's assumed denominators: the step rests on them
            instantiate_and_match(rule, subst, self.t, self.binding, lhs, rhs, self.varying,
                                  self.signs_full)
        except RuleMismatch as e:
            raise _fail(f"{where}: rule {name}: {e}") from None
        return True

    def smt(self, where: str, st: dict[str, Any], lhs: int, rhs: int) -> None:
        from proofs.smt import SmtError, build_query, run_query

        from proofs.admissible import smt_binding_error

        b = st.get("binding")
        if not isinstance(b, dict) or not all(isinstance(v, int) and v > 0 for v in b.values()):
            raise _fail(f"{where}: bad binding")
        # recomputed from the terms and the real binding (docs/soundness.md), never trusted
        err = smt_binding_error(self.t.nodes, lhs, rhs, self.binding, b,
                                self.cert.get("assumptions", ()))
        if err is not None:
            raise _fail(f"{where}: {err}")
        try:
            q = build_query(self.t, lhs, rhs, b)
        except SmtError as e:
            raise _fail(f"{where}: cannot regenerate the query: {e}") from None
        if q.smt2 != st.get("smt2"):
            raise _fail(f"{where}: the stored SMT-LIB2 text differs from the query regenerated "
                        f"from nodes {lhs} and {rhs}")
        if st.get("answer") != "unsat":
            raise _fail(f"{where}: answer {st.get('answer')!r} is not a proof")
        answer = run_query(q, self.smt_timeout_s)
        self.smt_count += 1
        if answer != "unsat":
            raise _fail(f"{where}: z3 answers {answer!r} to the regenerated query, not unsat")


def _renaming_ok(t: NodeTable, a_roots: tuple[int, int], b_roots: tuple[int, int]) -> str | None:
    """Is there a bijective renaming of INPUT names mapping the terms of ``a`` onto ``b``?"""
    ren: dict[str, str] = {}
    back: dict[str, str] = {}
    seen: set[tuple[int, int]] = set()
    stack = list(zip(a_roots, b_roots))
    while stack:
        x, y = stack.pop()
        if (x, y) in seen:
            continue
        seen.add((x, y))
        ox, ax, tx, dx = t.nodes[x]
        oy, ay, ty, dy = t.nodes[y]
        if ox != oy or dx != dy or len(ax) != len(ay):
            return f"nodes {x} and {y} differ in op or dims"
        if ox == "INPUT":
            if tx[1:] != ty[1:]:
                return f"inputs {tx[0]!r} and {ty[0]!r} differ in kind or domain"
            if ren.setdefault(tx[0], ty[0]) != ty[0] or back.setdefault(ty[0], tx[0]) != tx[0]:
                return f"input {tx[0]!r} is not renamed consistently"
            continue
        if tx != ty or [type(v) for v in tx] != [type(v) for v in ty]:
            return f"nodes {x} and {y} differ in attrs"
        stack.extend(zip(ax, ay))
    return None


def check_certificate(path: str | Path, *, retrace: bool = True,
                      plan_path: str | Path | None = None, smt_timeout_s: float = 60.0,
                      trace_timeout_s: float = 600.0, early: Any = None) -> CheckResult:
    """Check a certificate file; return a summary or raise.

    ``retrace`` (default): re-trace the plan file (``plan_path``, else the recorded path, as
    given or beside the certificate) in a separate clean interpreter while the steps replay, and
    compare (:mod:`proofs.retrace`); without the file the certificate is not tied to a plan and
    is rejected. ``retrace=False`` (``--no-retrace``) checks the certificate alone. ``early``:
    a :class:`proofs.retrace.EarlyRetrace` started before the certificate existed (``prove``'s
    self-check), used in place of a new re-trace only when it traced the same bytes.

    Raises:
        MalformedCertificate: unreadable, not JSON, wrong format or version, schema violation.
        CertificateError: any failed check (one line naming it).
    """
    text = None
    if retrace and early is None and plan_path is not None:
        from proofs.checker_load import certificate_text
        from proofs.retrace import speculative_retrace

        text = certificate_text(path)
        early = speculative_retrace(plan_path, text, trace_timeout_s)
    try:
        cert = load(path, text)
    except BaseException:
        if early is not None:
            early.cancel()
        raise
    pending = None
    if retrace and early is not None:
        pending = early.adopt(cert, path, plan_path)
    elif retrace:
        from proofs.retrace import start_retrace

        pending = start_retrace(cert, path, plan_path, trace_timeout_s)
    try:
        res = _check(path, cert, smt_timeout_s, retraced=pending is not None)
        if pending is not None:
            from proofs.retrace import finish_retrace

            finish_retrace(pending, cert, res.hashes)
    finally:
        if pending is not None:
            pending.cancel()
    res.retraced = pending is not None
    return res


def _check(path: str | Path, cert: dict[str, Any], smt_timeout_s: float, *,
           retraced: bool = False) -> CheckResult:
    """Steps 2 to 6 of the module docstring (everything but the re-trace). ``retraced``: the
    re-trace will run, and it decides an UNKNOWN whose every goal is proved (the front end's
    own open items: outputs it could not lower, a rank literal, state the step leaves;
    :func:`proofs.retrace.finish_retrace`)."""
    # 2. the node table
    try:
        with paused_gc():
            table = NodeTable.from_json(cert["nodes"])
            typed: set[Any] = set()   # typecheck reads op, attrs, dims and the args' dims only
            for i, (op, args, _, dims) in enumerate(table.nodes):
                key = (op, table._akeys[i], dims, tuple([table.nodes[a][3] for a in args]))
                if key not in typed:
                    typecheck(table, i)
                    typed.add(key)
            check_sizes(table, dict(cert["binding"]))
    except KernelMalformed as e:
        raise MalformedCertificate(f"{path}: node table: {e}") from None
    except KernelError as e:
        raise _fail(f"node table: {e}") from None
    except (IndexError, KeyError, TypeError, ValueError) as e:  # attrs of the wrong arity/type
        raise MalformedCertificate(f"{path}: node table: a node's attributes do not fit its op "
                                   f"({type(e).__name__}: {e})") from None
    with paused_gc():
        hashes = node_hash_table(table)
    obligations = cert["obligations"]
    chk = _Checker(cert, table, smt_timeout_s)
    names = [o["name"] for o in obligations]
    if len(set(names)) != len(names):
        raise _fail("two goals have the same name")
    for o in obligations:
        chk.node(o["expected"], f"goal {o['name']} expected")
        chk.node(o["actual"], f"goal {o['name']} actual")
    # 3. hashes and ruleset
    binding = dict(cert["binding"])
    spec_h = roots_hash(hashes, [(o["name"], o["expected"]) for o in obligations],
                        spec_binding(binding))
    plan_h = roots_hash(hashes, [(o["name"], o["actual"]) for o in obligations], binding)
    if spec_h != cert["spec_sha256"]:
        raise _fail(f"spec_sha256 {cert['spec_sha256'][:12]}... is not the hash of the "
                    f"goals' expected terms and the binding's dim sizes ({spec_h[:12]}...)")
    if plan_h != cert["plan_sha256"]:
        raise _fail(f"plan_sha256 {cert['plan_sha256'][:12]}... is not the hash of the "
                    f"goals' actual terms and the binding ({plan_h[:12]}...)")
    for o in obligations:
        for side in ("expected", "actual"):
            want = o.get(side + "_sha256")
            if want is not None and want != hashes[o[side]]:
                raise _fail(f"goal {o['name']}: {side}_sha256 does not match node "
                            f"{o[side]}")
    rs = cert["ruleset"]
    if (rs.get("name"), rs.get("version"), rs.get("sha256")) != \
            (RULESET["name"], RULESET["version"], RULESET["sha256"]):
        raise _fail(f"ruleset {rs.get('name')} {rs.get('version')} "
                    f"(sha256 {str(rs.get('sha256'))[:12]}...) is not this checker's "
                    f"{RULESET['name']} {RULESET['version']} ({RULESET['sha256'][:12]}...)")
    # 4. steps (the spec's assumed denominators first: proofs/checker_signs.py)
    spec_roots = [o["expected"] for o in obligations if chk.cut_free()[o["expected"]]]
    try:
        assumed, den_proofs = assumed_denominators(table, cert.get("denominators"), spec_roots,
                                                   chk.steps)
    except DenominatorError as e:
        raise _fail(f"denominators: {e}") from None
    if assumed:
        chk.signs_full = Signs(table, assumed)
    chk.replay()
    for s in sorted(den_proofs):
        if chk.dep[s]:
            raise _fail(f"denominators: step {s} (a spec denominator's normal form) itself rests "
                        f"on an assumed denominator")
    # 5. obligations
    by_name = {o["name"]: o for o in obligations}
    proved = 0
    for o in obligations:
        m = o["method"]
        where = f"goal {o['name']}"
        if m in ("rewrite", "smt"):
            s = o.get("proof")
            if isinstance(s, bool) or not isinstance(s, int) or not 0 <= s < len(chk.steps):
                raise _fail(f"{where}: proof {s!r} is not a step")
            st = chk.steps[s]
            if (st["lhs"], st["rhs"]) != (o["expected"], o["actual"]):
                raise _fail(f"{where}: step {s} proves node {st['lhs']} == node {st['rhs']}, "
                            f"not expected {o['expected']} == actual {o['actual']}")
            if m == "smt" and not _uses_smt(chk.steps, s, ("smt", "cas")):
                raise _fail(f"{where}: method smt but the proof has no smt step")
            proved += 1
        elif m == "reused":
            src = by_name.get(o.get("reuses"))
            if src is None or src["method"] not in ("rewrite", "smt"):
                raise _fail(f"{where}: reuses {o.get('reuses')!r}, which is not a proved goal")
            why = _renaming_ok(table, (src["expected"], src["actual"]), (o["expected"], o["actual"]))
            if why is not None:
                raise _fail(f"{where}: not a renaming of {src['name']}: {why}")
            sp = src.get("proof")
            if isinstance(sp, int) and not isinstance(sp, bool) and 0 <= sp < len(chk.dep) \
                    and chk.dep[sp]:
                raise _fail(f"{where}: {src['name']}'s proof rests on an assumed spec "
                            f"denominator, which a renaming of inputs does not carry")
            proved += 1
        elif m in ("open", "refuted"):
            if not o.get("reason"):
                raise _fail(f"{where}: {m} without a reason")
        else:
            raise _fail(f"{where}: unknown method {m!r}")
    # 6. verdict
    verdict = cert["verdict"]
    refuted = [o for o in obligations if o["method"] == "refuted"]
    open_ = [o for o in obligations if o["method"] == "open"]
    if verdict == "EQUIVALENT" and (open_ or refuted or proved != len(obligations)
                                    or not obligations):
        raise _fail(f"verdict EQUIVALENT but {len(obligations) - proved} of {len(obligations)} "
                    f"goals are not proved")
    if verdict == "NOT EQUIVALENT" and not (refuted and cert.get("counterexample")):
        raise _fail("verdict NOT EQUIVALENT without a refuted goal and a counterexample")
    if verdict == "UNKNOWN" and not (open_ or refuted) and proved == len(obligations) \
            and obligations and not retraced:
        raise _fail("verdict UNKNOWN but every goal is proved")
    if verdict != "NOT EQUIVALENT" and (refuted or cert.get("counterexample") is not None):
        raise _fail(f"verdict {verdict} with a refuted goal or a counterexample")
    if verdict == "NOT EQUIVALENT":
        _check_refutation(cert, table, chk, refuted)
    if verdict == "EQUIVALENT":
        _require_rng_assumption(cert, table)
    res = CheckResult(verdict, proved, len(obligations), len(chk.steps), chk.smt_count, False)
    res.refuted = len(refuted) if verdict == "NOT EQUIVALENT" else 0
    res.hashes = hashes
    return res


def _uses_smt(steps: list[dict[str, Any]], s: int, kinds: tuple[str, ...] = ("smt",)) -> bool:
    stack, seen = [s], set()
    while stack:
        k = stack.pop()
        if k in seen:
            continue
        seen.add(k)
        st = steps[k]
        if st["kind"] in kinds:
            return True
        stack.extend(st.get("steps", []))
        stack.extend(x for x in st.get("args", []) if x is not None)
        if "of" in st:
            stack.append(st["of"])
        if "lemma" in st:  # cut: the lemma and every premise
            stack.append(st["lemma"])
            stack.extend(c["premise"] for c in st["cuts"])
    return False
