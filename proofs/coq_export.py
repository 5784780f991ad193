"""Export a certificate to a Coq file that states and proves its obligations (docs/coq.md).

The exported file holds the certificate's node table, steps and obligations as a packed stream
of 63-bit integers (``Shardproof.Decode``: Coq parses a few thousand large integer literals far
faster than the same data as terms), and proves, by running the Coq-verified checker
``Shardproof.Cert.check_cert`` on it, one theorem: for every context whose sizes satisfy the
table's divisibility facts (and the size facts listed in the file), every obligation Coq reports
as proved is an equality of its two sides on every rank and index (``check_cert_sound``).

Translation is one-to-one and strict. Names (dims, mesh axes, inputs) become positive numbers
(the table is printed in the file's header); constants are read with this module's own parser of
the certificate's exact encodings (``{"q": "P/Q"}`` rationals, ``{"alg": ...}`` radical sums,
plain integers; docs/certificate.md, format 3); it never evaluates text. A constant
it cannot read becomes an input of its own (``const?``): the Coq theorem then holds for every
value of it, in particular the real one, and the steps that need its value do not check.
Rule steps go to Coq's checker of that rule when ``proofs/coq/Rules.v`` has one (its ``rtag_of``
table) and the step is inside what that checker proves (``proofs/coq_subsets.py``); other rule
steps and every ``smt`` / ``cas`` step are exported as *opaque* steps: Coq takes their equation
as a hypothesis (a claim) and the obligations resting on them are reported as not Coq-checked.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path
from typing import Any

from proofs.coq_constants import Num, parse_const, parse_rational
from proofs.coq_subsets import LazySigns, outside_coq_subset

__all__ = ["CoqExport", "ExportError", "export_certificate", "rule_codes", "COQ_DIR",
           "fingerprint"]

COQ_DIR = Path(__file__).with_name("coq")
CUT_PREFIX = "cut:"
WORD_CHUNKS = 10          # 6-bit chunks per 63-bit integer (Decode.next_chunk)
WORDS_PER_DEF = 2000      # integers per Coq definition (keeps each term small)
MAX_BITS = 5 * 2700       # bits of one number Decode.rdN reads (2700 chunks of 5 bits)


class ExportError(ValueError):
    """The certificate cannot be exported (malformed where the checker would reject it)."""


# -- the rule table ------------------------------------------------------------------------
_TAG_LINE = re.compile(r"\|\s*(\d+)%N\s*=>\s*Some\s+(\w+)\s*\(\*\s*([a-z0-9-]+)\s*\*\)")


def rule_codes(rules_v: Path | None = None) -> dict[str, int]:
    """``{rule name: code}`` from ``Rules.v``'s ``rtag_of`` table (one line per rule)."""
    text = (rules_v or COQ_DIR / "Rules.v").read_text()
    body = text[text.index("Definition rtag_of"):]
    body = body[:body.index("end.")]
    out: dict[str, int] = {}
    for m in _TAG_LINE.finditer(body):
        code, _tag, name = int(m.group(1)), m.group(2), m.group(3)
        if name in out:
            raise ExportError(f"Rules.v: rule {name} has two codes")
        out[name] = code
    return out


# -- the export ----------------------------------------------------------------------------
OPCODES = {op: i for i, op in enumerate((
    "INPUT", "CONST", "DIM_SIZE", "AXIS_SIZE", "RANK_CONST", "CAUSAL_MASK", "ROPE", "ADD", "MUL",
    "UN", "POW", "MAXIMUM", "WHERE", "EINSUM", "REDUCE_MAX", "ONE_HOT", "TOPK_MASK", "RENAME",
    "CHUNK", "CONCAT", "PERMUTE", "SHIFT", "SHARD", "PART", "ALL_REDUCE", "ALL_GATHER",
    "REDUCE_SCATTER", "BROADCAST", "ALL_TO_ALL"))}
UNARY = {u: i for i, u in enumerate(("NEG", "RECIP", "EXP", "LOG", "SQRT", "RSQRT", "SIGMOID",
                                     "SILU", "TANH", "GELU", "CAST", "STOP_GRAD",
                                     "ERF"))}
DOMAINS = {"real": 0, "positive": 1, "mask": 2, "index": 3}


@dataclass
class CoqExport:
    """What :func:`export_certificate` produced: the Coq source and what it stands for."""

    source: str                       # the .v file
    names: dict[str, int]             # name -> positive id
    fingerprint: int                  # Decode.cert_fingerprint of the encoded certificate
    obligations: list[str]            # names of the exported obligations, in order
    not_exported: dict[str, str]      # obligation -> why it has no Coq statement (open, refuted)
    opaque: dict[int, str]            # step -> why Coq takes it as a hypothesis
    rule_steps: int                   # rule steps exported to a Coq checker
    steps: int
    nodes: int
    words: int                        # 63-bit integers in the file
    unread_constants: list[int] = field(default_factory=list)   # nodes made inputs ``const?``
    rule_step_ids: list[int] = field(default_factory=list)      # steps sent to a Coq checker


class _Names:
    def __init__(self) -> None:
        self.ids: dict[str, int] = {}

    def __call__(self, s: Any) -> int:
        if not isinstance(s, str):
            raise ExportError(f"name {s!r} is not a string")
        i = self.ids.get(s)
        if i is None:
            i = self.ids[s] = len(self.ids) + 1
        return i


def _zig(z: int) -> int:
    return 2 * z if z >= 0 else -2 * z - 1


class _Stream:
    """Unsigned numbers as 6-bit chunks (continuation bit 32, low 5 bits first)."""

    def __init__(self) -> None:
        self.chunks: list[int] = []

    def n(self, v: int) -> None:
        if v < 0:
            raise ExportError(f"negative number {v} in the stream")
        if v.bit_length() > MAX_BITS:
            raise ExportError(f"a number of {v.bit_length()} bits (Decode.rdN reads at most "
                              f"{MAX_BITS})")
        while True:
            c = v & 31
            v >>= 5
            if v:
                self.chunks.append(c | 32)
            else:
                self.chunks.append(c)
                return

    def pos(self, p: int) -> None:      # a positive number p >= 1, written as p - 1
        if p < 1:
            raise ExportError(f"positive number {p} < 1")
        self.n(p - 1)

    def q(self, f: Fraction) -> None:
        self.n(_zig(f.numerator))
        self.pos(f.denominator)

    def lst(self, items: list[Any], each) -> None:
        self.n(len(items))
        for x in items:
            each(x)

    def words(self) -> list[int]:
        out = []
        for i in range(0, len(self.chunks), WORD_CHUNKS):
            w = 0
            for j, c in enumerate(self.chunks[i:i + WORD_CHUNKS]):
                w |= c << (6 * j)
            out.append(w)
        return out


# -- the fingerprint Coq prints (Decode.cert_fingerprint), over the exported structure -----
# modulo 2^63 (Coq's primitive integers): mix h x = h * 1000003 + x + 1
FP_MOD = 2**63


def _mix(h: int, x: int) -> int:
    return (h * 1000003 + x + 1) % FP_MOD


def _mixl(f, h: int, items: list[Any]) -> int:
    h = _mix(h, len(items))
    for x in items:
        h = f(h, x)
    return h


def _fp_q(h: int, q: Fraction) -> int:
    return _mix(_mix(h, _zig(q.numerator)), q.denominator)


def _fp_num(h: int, x: Num) -> int:
    return _mixl(lambda h, t: _mixl(lambda h, be: _fp_q(_mix(h, be[0]), be[1]), _fp_q(h, t[0]),
                                    list(t[1])), h, list(x))


def _fp_shard(h: int, s: tuple) -> int:
    return _mix(_mix(h, 0), s[1]) if s[0] == 0 else _mix(_mix(_mix(h, 1), s[1]), s[2])


def _fp_dims(h: int, dims: list) -> int:
    return _mixl(lambda h, d: _mixl(_fp_shard, _mix(h, d[0]), list(d[1])), h, dims)


def _fp_names(h: int, l: list[int]) -> int:
    return _mixl(_mix, h, l)


def _fp_op(h: int, op: tuple) -> int:
    code, *a = op
    h = _mix(h, code)
    if code == 1:                      # CONST
        return _fp_num(h, a[0])
    if code == 4:                      # RANK_CONST
        return _mixl(_fp_num, _mix(h, a[0]), list(a[1]))
    if code == 6:                      # ROPE: sin, s, h, theta
        return _fp_q(_mix(_mix(_mix(h, a[0]), a[1]), a[2]), a[3])
    if code == 10:                     # POW
        return _fp_q(h, a[0])
    if code in (13, 14):               # EINSUM / REDUCE_MAX: a list of names
        return _fp_names(h, list(a[0]))
    if code == 20:                     # PERMUTE: d, order
        return _mixl(_mix, _mix(h, a[0]), list(a[1]))
    for x in a:                        # the others: numbers in order
        h = _mix(h, x)
    return h


def fingerprint(facts: list[tuple[int, int]], cut: list[int], nodes: list[tuple],
                steps: int, obs: int) -> int:
    """``Decode.cert_fingerprint`` of the exported certificate (nodes as (op, args, dims))."""
    h = _mixl(lambda h, p: _mix(_mix(h, p[0]), p[1]), 0, facts)
    h = _fp_names(h, cut)
    h = _mixl(lambda h, nd: _fp_dims(_fp_names(_fp_op(h, nd[0]), list(nd[1])), nd[2]), h, nodes)
    return _mix(_mix(h, steps), obs)


# -- translation ---------------------------------------------------------------------------
# rules whose Coq checker reads the size of a dim or axis named in the step's substitution:
# the exporter passes the binding's size as a fact [sz n = v] of the theorem
_FACT_ATTR = {"dim-size": "d", "axis-size": "a", "allreduce-sum-invariant": "a",
              "allreduce-rank-const": "a", "allreduce-unit-axis": "a", "part-unit-axis": "a",
              "broadcast-unit-axis": "a", "einsum-unit-axis": "a", "reduce-max-unit-axis": "a",
              "allgather-unit-axis": "a"}

# the rules whose Coq checkers read a size fact sz n = 1 for every unit dim (RulesUnitDim.v)
_UNIT_DIM_RULES = frozenset({"einsum-unit-dim", "squeeze-elementwise", "reduce-max-unit-dim"})


def _step_dims(rows: list, l: Any, r: Any) -> set[str]:
    """The dim names of a step's two nodes and of their children."""
    out: set[str] = set()
    for i in (l, r):
        if isinstance(i, int) and 0 <= i < len(rows):
            for k in [i, *rows[i][1]]:
                if isinstance(k, int) and 0 <= k < len(rows):
                    out |= {d[0] for d in rows[k][3] if isinstance(d, list) and d and
                            isinstance(d[0], str)}
    return out


def _shard(s: Any, names: _Names) -> tuple:
    if not isinstance(s, str):
        raise ExportError(f"shard {s!r} is not a string")
    if s.startswith("#"):
        m = re.fullmatch(r"#(\d+)/(\d+)", s)
        if not m:
            raise ExportError(f"bad chunk marker {s!r}")
        return (1, int(m.group(1)), int(m.group(2)))
    return (0, names(s))


def _input_key(attrs: Any) -> str:
    """The Coq name of an ``INPUT``: all of its attributes (name, kind, domain, range dim), so
    that two inputs the kernel keeps apart are apart in Coq too, and never the name of a
    constant the exporter cannot read (``const?<node>``): adversarial finding R21-1."""
    return "input " + json.dumps(list(attrs), separators=(",", ":"))


def _op(row: list, i: int, names: _Names, unread: list[int]) -> tuple:
    op, _args, attrs, _dims = row
    A = attrs
    try:
        match op:
            case "INPUT":
                return (0, names(_input_key(A)), DOMAINS[A[2]])
            case "CONST":
                v = parse_const(A[0])
                if v is None:
                    unread.append(i)
                    return (0, names(f"const?{i}"), DOMAINS["real"])
                return (1, v)
            case "DIM_SIZE":
                return (2, names(A[0]))
            case "AXIS_SIZE":
                return (3, names(A[0]))
            case "RANK_CONST":
                vals = [parse_const(v) for v in A[1]]
                if any(v is None for v in vals):
                    unread.append(i)
                    return (0, names(f"const?{i}"), DOMAINS["real"])
                return (4, names(A[0]), tuple(vals))
            case "CAUSAL_MASK":
                return (5, names(A[0]), names(A[1]))
            case "ROPE_COS" | "ROPE_SIN":
                th = parse_rational(A[2])
                if th is None:
                    raise ExportError(f"node {i}: rope theta {A[2]!r} is not rational")
                return (6, 1 if op == "ROPE_SIN" else 0, names(A[0]), names(A[1]), th)
            case "ADD":
                return (7,)
            case "MUL":
                return (8,)
            case "POW":
                e = parse_rational(A[0])
                if e is None:
                    raise ExportError(f"node {i}: exponent {A[0]!r} is not rational")
                return (10, e)
            case "MAXIMUM":
                return (11,)
            case "WHERE":
                return (12,)
            case "EINSUM":
                return (13, tuple(names(n) for n in A[0]))
            case "REDUCE_MAX":
                return (14, tuple(names(n) for n in A[0]))
            case "ONE_HOT":
                return (15, names(A[0]))
            case "TOPK_MASK":
                return (16, names(A[0]), _nat(A[1]))
            case "RENAME":
                return (17, names(A[0]), names(A[1]))
            case "CHUNK":
                return (18, names(A[0]), _nat(A[1]), _nat(A[2]))
            case "CONCAT":
                return (19, names(A[0]))
            case "PERMUTE":
                return (20, names(A[0]), tuple(_nat(j) for j in A[1]))
            case "SHIFT":
                return (21, names(A[0]))
            case "SHARD":
                return (22, names(A[0]), names(A[1]))
            case "PART":
                return (23, names(A[0]))
            case "ALL_REDUCE":
                return (24, names(A[0]), {"sum": 0, "max": 1}[A[1]])
            case "ALL_GATHER":
                return (25, names(A[0]), names(A[1]))
            case "REDUCE_SCATTER":
                return (26, names(A[0]), names(A[1]))
            case "BROADCAST":
                return (27, names(A[0]), _nat(A[1]))
            case "ALL_TO_ALL":
                return (28, names(A[0]), names(A[1]), names(A[2]))
            case _ if op in UNARY:
                return (9, UNARY[op])
    except (IndexError, KeyError, TypeError) as e:
        raise ExportError(f"node {i} ({op}): attributes {attrs!r} do not fit the op "
                          f"({type(e).__name__})") from None
    raise ExportError(f"node {i}: unknown op {op!r}")


def _nat(x: Any) -> int:
    if isinstance(x, bool) or not isinstance(x, int) or x < 0:
        raise ExportError(f"{x!r} is not a natural number")
    return x


def _put_num(s: _Stream, x: Num) -> None:
    s.lst(list(x), lambda t: (s.q(t[0]), s.lst(list(t[1]), lambda be: (s.pos(be[0]), s.q(be[1])))))


def _put_op(s: _Stream, op: tuple) -> None:
    code, *a = op
    s.n(code)
    if code == 0:
        s.pos(a[0]); s.n(a[1])
    elif code == 1:
        _put_num(s, a[0])
    elif code == 4:
        s.pos(a[0]); s.lst(list(a[1]), lambda v: _put_num(s, v))
    elif code == 6:
        s.n(a[0]); s.pos(a[1]); s.pos(a[2]); s.q(a[3])
    elif code == 10:
        s.q(a[0])
    elif code in (13, 14):
        s.lst(list(a[0]), s.pos)
    elif code == 20:
        s.pos(a[0]); s.lst(list(a[1]), s.n)
    else:
        # the other ops: names (positive) and naturals, in the order Decode.rdOp reads them
        kinds = {2: "p", 3: "p", 5: "pp", 7: "", 8: "", 9: "n", 11: "", 12: "", 15: "p",
                 16: "pn", 17: "pp", 18: "pnn", 19: "p", 21: "p", 22: "pp", 23: "p", 24: "pn",
                 25: "pp", 26: "pp", 27: "pn", 28: "ppp"}[code]
        for k, v in zip(kinds, a):
            (s.pos if k == "p" else s.n)(v)


def export_certificate(cert: dict[str, Any], *, label: str = "certificate") -> CoqExport:
    """Translate a certificate (already checked by ``proofs.checker``, or at least of its
    format) to the Coq file proving its obligations.

    Raises:
        ExportError: a row or step the translation does not understand (one line, naming it).
    """
    from proofs.coq_cuts import expand_class_cuts

    cert = expand_class_cuts(cert)   # class cuts as rename + exact cut (Steps.v checks those)
    codes = rule_codes()
    names = _Names()
    rows, steps, obs = cert["nodes"], cert["steps"], cert["obligations"]
    binding = cert.get("binding", {})
    unread: list[int] = []
    ir_nodes: list[tuple] = []
    dims_index: dict[tuple, int] = {}
    dims_lists: list[tuple] = []
    cut: list[int] = []
    for i, row in enumerate(rows):
        if not (isinstance(row, list) and len(row) == 4):
            raise ExportError(f"node {i} is not [op, args, attrs, dims]")
        op = _op(row, i, names, unread)
        args = row[1]
        if not all(isinstance(a, int) and not isinstance(a, bool) and 0 <= a < i for a in args):
            raise ExportError(f"node {i}: children must be earlier nodes")
        dims = tuple((names(n), tuple(_shard(s, names) for s in sh)) for n, sh in row[3])
        if dims not in dims_index:
            dims_index[dims] = len(dims_lists)
            dims_lists.append(dims)
        ir_nodes.append((op, tuple(a + 1 for a in args), dims, dims_index[dims] + 1))
        if row[0] == "INPUT" and isinstance(row[2][0], str) and row[2][0].startswith(CUT_PREFIX):
            cut.append(names(_input_key(row[2])))
    facts: dict[int, int] = {}
    unread_set = set(unread)
    signs = LazySigns(rows, unread_set)
    out_steps: list[tuple] = []
    opaque: dict[int, str] = {}
    rule_steps = 0
    rule_ids: list[int] = []
    for k, st in enumerate(steps):
        kind = st.get("kind")
        l, r = st.get("lhs"), st.get("rhs")
        outside = (outside_coq_subset(st["rule"], rows, st, unread_set, signs)
                   if kind == "rule" and st.get("rule") in codes else None)
        if kind == "refl":
            out_steps.append((0, l + 1))
        elif kind == "rule" and st.get("rule") in codes and outside is None:
            name = st["rule"]
            if name in _FACT_ATTR:
                a = st["subst"].get(_FACT_ATTR[name])
                if not isinstance(a, str) or a not in binding:
                    raise ExportError(f"step {k} ({name}): no size for {a!r} in the binding")
                facts[names(a)] = binding[a]
            if name in _UNIT_DIM_RULES:     # sz n = 1 for every size-1 dim the step touches
                for n in _step_dims(rows, l, r):
                    if binding.get(n) == 1:
                        facts[names(n)] = 1
            out_steps.append((1, codes[name], l + 1, r + 1, ()))
            rule_steps += 1
            rule_ids.append(k)
        elif kind == "congr":
            out_steps.append((2, l + 1, r + 1, tuple(0 if a is None else a + 1 for a in st["args"])))
        elif kind == "trans":
            out_steps.append((3, l + 1, r + 1, tuple(s + 1 for s in st["steps"])))
        elif kind == "sym":
            out_steps.append((4, l + 1, r + 1, st["of"] + 1))
        elif kind == "rename":
            out_steps.append((5, l + 1, r + 1, st["of"] + 1))
        elif kind == "cut":
            cps = tuple((c["spec"] + 1, c["plan"] + 1, c["var"] + 1, c["embed"] + 1,
                         c["premise"] + 1) for c in st["cuts"])
            out_steps.append((6, l + 1, r + 1, st["lemma"] + 1, cps))
        else:
            why = (outside if outside is not None
                   else f"rule {st.get('rule')} has no Coq checker" if kind == "rule"
                   else f"a {kind} step (not formalised in Coq)")
            opaque[k] = why
            out_steps.append((7, l + 1, r + 1))
    exported: list[tuple] = []
    ob_names: list[str] = []
    not_exported: dict[str, str] = {}
    by_name = {o["name"]: o for o in obs}
    for o in obs:
        m = o.get("method")
        if m in ("rewrite", "smt"):
            exported.append((o["expected"] + 1, o["actual"] + 1, 0, o["proof"] + 1))
        elif m == "reused" and by_name.get(o.get("reuses"), {}).get("method") in ("rewrite", "smt"):
            exported.append((o["expected"] + 1, o["actual"] + 1, 1, by_name[o["reuses"]]["proof"] + 1))
        else:
            not_exported[o["name"]] = f"method {m}"
            continue
        ob_names.append(o["name"])
    fact_list = sorted(facts.items())
    s = _Stream()
    s.lst(fact_list, lambda p: (s.pos(p[0]), s.n(p[1])))
    s.lst(cut, s.pos)
    s.lst(dims_lists, lambda D: s.lst(list(D), lambda d: (
        s.pos(d[0]), s.lst(list(d[1]), lambda sh: (s.n(sh[0]), s.pos(sh[1])) if sh[0] == 0
                                                 else (s.n(1), s.n(sh[1]), s.n(sh[2]))))))
    s.lst(ir_nodes, lambda nd: (_put_op(s, nd[0]), s.lst(list(nd[1]), s.pos), s.pos(nd[3])))
    s.lst(out_steps, lambda st: _put_step(s, st))
    s.lst(exported, lambda ob: (s.pos(ob[0]), s.pos(ob[1]), s.n(ob[2]), s.pos(ob[3])))
    words = s.words()
    fp = fingerprint(fact_list, cut, [(nd[0], nd[1], list(nd[2])) for nd in ir_nodes],
                     len(out_steps), len(exported))
    src = _source(label, cert, names.ids, fact_list, ob_names, not_exported, opaque, words)
    return CoqExport(src, dict(names.ids), fp, ob_names, not_exported, opaque, rule_steps,
                     len(out_steps), len(ir_nodes), len(words), unread, rule_ids)


def _put_step(s: _Stream, st: tuple) -> None:
    tag, *a = st
    s.n(tag)
    if tag == 0:
        s.pos(a[0])
    elif tag == 1:
        s.n(a[0]); s.pos(a[1]); s.pos(a[2]); s.lst(list(a[3]), s.n)
    elif tag == 2:
        s.pos(a[0]); s.pos(a[1]); s.lst(list(a[2]), s.n)
    elif tag == 3:
        s.pos(a[0]); s.pos(a[1]); s.lst(list(a[2]), s.pos)
    elif tag in (4, 5):
        s.pos(a[0]); s.pos(a[1]); s.pos(a[2])
    elif tag == 6:
        s.pos(a[0]); s.pos(a[1]); s.pos(a[2])
        s.lst(list(a[3]), lambda c: [s.pos(x) for x in c])
    else:
        s.pos(a[0]); s.pos(a[1])


def _comment(text: str) -> str:
    """``text`` made inert inside a Coq comment: no comment delimiter and no string quote (a
    quote opens a string that can swallow the comment's end; adversarial finding R21-2)."""
    return text.replace('"', "'").replace("(*", "( *").replace("*)", "* )")


def _source(label: str, cert: dict[str, Any], names: dict[str, int], facts: list[tuple[int, int]],
            ob_names: list[str], not_exported: dict[str, str], opaque: dict[int, str],
            words: list[int]) -> str:
    inv = {v: k for k, v in names.items()}
    plan = cert.get("plan", {}) if isinstance(cert.get("plan"), dict) else {}
    head = [
        f"(* {_comment(label)}: the obligations of a shardproof certificate, stated and proved in Coq.",
        f"   plan {_comment(str(plan.get('path')))} (sha256 {str(plan.get('sha256'))[:16]}...), "
        f"verdict {_comment(str(cert.get('verdict')))},",
        f"   {len(cert['nodes'])} nodes, {len(cert['steps'])} steps, {len(ob_names)} obligations "
        f"exported ({len(not_exported)} not: open or refuted).",
        "   How to read this file: docs/coq.md. [C] is the certificate, decoded from [words];",
        "   [Eval vm_compute in node_at (gT (cert_gctx C)) 17%positive] shows node 17 (the",
        "   certificate's node 16). Names are numbered as follows. *)",
        "(* names: " + _comment(", ".join(f"{i} = {inv[i]}" for i in sorted(inv))) + " *)",
        "(* size facts the theorem assumes (sz n = v): "
        + _comment(", ".join(f"{inv[n]} = {v}" for n, v in facts) or "none") + " *)",
        "(* obligations, in the order of [c_obs C]: "
        + _comment(", ".join(f"{k} = {n}" for k, n in enumerate(ob_names))) + " *)",
    ]
    if opaque:
        head.append("(* steps Coq takes as hypotheses (claims CEq): " + _comment(", ".join(
            f"step {k}: {w}" for k, w in sorted(opaque.items())[:200]))
            + (" ..." if len(opaque) > 200 else "") + " *)")
    body = ["From Coq Require Import List NArith Uint63.",
            "From Shardproof Require Import Base Num Term RuleLib Rules Steps Cert Decode.",
            "Import ListNotations.", "", "Local Open Scope uint63_scope."]
    parts = []
    for j in range(0, len(words), WORDS_PER_DEF):
        name = f"w{j // WORDS_PER_DEF}"
        parts.append(name)
        body.append(f"Definition {name} : list int := ["
                    + "; ".join(str(w) for w in words[j:j + WORDS_PER_DEF]) + "].")
    body.append("Definition words : list int := " + (" ++ ".join(parts) or "[]") + ".")
    body += ["Local Close Scope uint63_scope.", "",
             "Definition C : cert := decode words.",
             "(* the report: computed once, by the first [Eval vm_compute] below, which prints it *)",
             "Definition report := check_cert C.", "",
             "(** For every context whose sizes satisfy the table's divisibility facts and the",
             "    size facts above, with positive inputs positive and any Partial addends: every",
             "    obligation [report] marks [Proved cl] is an equality of its two sides, on every",
             "    rank and index, wherever the claims [cl] hold (Cert.check_cert_sound). *)",
             "Theorem certificate : forall c : ctx,",
             "  sizes_ok (sz c) (gT (cert_gctx C)) ->",
             "  (forall n v, In (n, v) (c_facts C) -> sz c n = N.to_nat v) ->",
             "  dom_ok c (cert_gctx C) -> po_ok c ->",
             "  Forall2 (ob_holds (gT (cert_gctx C)) c) (c_obs C) (fst report).",
             "Proof. intros c H1 H2 H3 H4. apply check_cert_sound; assumption. Qed.", "",
             "Eval vm_compute in cert_fingerprint C.",
             "Eval vm_compute in report_codes report.",
             "Eval vm_compute in report_claims report.",
             "Eval vm_compute in snd report.",
             "Print Assumptions certificate."]
    return "\n".join(head + [""] + body) + "\n"
