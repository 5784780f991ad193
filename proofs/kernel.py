"""The certificate's term kernel: a hash-consed node table with its own typing and hashing.

This module is part of the *trusted* base of :mod:`proofs.checker`, so it depends on nothing
but the standard library and :mod:`proofs.exact_numbers` (the strict grammar of exact
constants, which builds sympy numbers for non-rational ones). It does not import
``spec_lang``, ``rewriting`` or ``egglog``; :func:`from_terms` takes ``spec_lang`` terms by duck
typing (``t.op.name``, ``t.args``, ``t.attrs``, ``t.dims``).

A node is ``(op, args, attrs, dims)``:

* ``op``: the op's name (``"SHARD"``), one of :data:`OPS` (the closed set of ``spec_lang.term.Op``).
* ``args``: ids of earlier nodes (a table is topologically ordered: children first).
* ``attrs``: a tuple of JSON-able scalars, nested tuples, ``Fraction`` and sympy numbers.
* ``dims``: a tuple of ``(name, shards)`` with ``shards`` a tuple of mesh axis names
  (``"#i/parts"`` for a ``CHUNK`` pseudo-shard).

In JSON (certificate ``"nodes"``) a node is ``[op, [args...], [attrs...], [[dim, [shards...]], ...]]``
with attrs encoded by :func:`encode_attr`: a ``Fraction`` is ``{"q": "p/q"}``, a non-rational
exact number ``{"alg": [...]}`` (both :mod:`proofs.exact_numbers`), a tuple a JSON list; ints
(of at most 63 bits), strings, booleans and null are themselves. Nothing of a certificate is
evaluated.
"""

from __future__ import annotations

import gc
import hashlib
import json
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

from proofs.exact_numbers import ExactError, decode_number, encode_number

INPUT_KINDS = ("param", "data", "state", "cut")   # spec_lang.term.INPUT_KINDS; "cut": a cut step's
#                                                  variable, named "cut:..." (proofs/cut.py)
INPUT_DOMAINS = ("real", "positive", "mask", "index")  # as spec_lang.term.INPUT_DOMAINS

__all__ = [
    "OPS", "Node", "DimRef", "NodeTable", "KernelError", "KernelMalformed", "encode_attr", "decode_attr", "from_terms",
    "canonical_json", "node_hash_table", "roots_hash", "typecheck", "check_sizes", "MESH_AXES",
    "spec_binding", "paused_gc",
]


class KernelError(ValueError):
    """A node table is wrong (forward reference, duplicate row, ill-typed node, bad size)."""


class KernelMalformed(KernelError):
    """A node row is not of the format (not ``[op, args, attrs, dims]``, unknown op, an attribute
    without a decoding): a schema violation, which the checker reports as malformed (exit 3)."""


# The closed op set, by name (spec_lang.term.Op; REGION is lowered away before proving).
OPS = frozenset({
    "INPUT", "CONST", "DIM_SIZE", "AXIS_SIZE", "RANK_CONST", "CAUSAL_MASK", "ROPE_COS", "ROPE_SIN",
    "ADD", "MUL", "NEG", "RECIP", "EXP", "LOG", "SQRT", "RSQRT", "POW", "SIGMOID", "SILU", "TANH",
    "GELU", "ERF", "MAXIMUM", "WHERE", "CAST", "STOP_GRAD",
    "EINSUM", "REDUCE_MAX", "ONE_HOT", "TOPK_MASK",
    "RENAME", "CHUNK", "CONCAT", "PERMUTE", "SHIFT",
    "SHARD", "PART", "ALL_REDUCE", "ALL_GATHER", "REDUCE_SCATTER", "BROADCAST", "ALL_TO_ALL",
})
ELEMENTWISE = frozenset({
    "ADD", "MUL", "NEG", "RECIP", "EXP", "LOG", "SQRT", "RSQRT", "POW", "SIGMOID", "SILU", "TANH",
    "GELU", "ERF", "MAXIMUM", "WHERE", "CAST", "STOP_GRAD",
})

_NARGS = {"INPUT": 0, "CONST": 0, "DIM_SIZE": 0, "AXIS_SIZE": 0, "RANK_CONST": 0, "CAUSAL_MASK": 0,
          "ROPE_COS": 0, "ROPE_SIN": 0, "WHERE": 3, "MAXIMUM": 2, "REDUCE_MAX": 1, "ONE_HOT": 1,
          "RENAME": 1, "CHUNK": 1, "PERMUTE": 1, "SHIFT": 1, "SHARD": 1, "PART": 1, "ALL_REDUCE": 1,
          "ALL_GATHER": 1, "REDUCE_SCATTER": 1, "BROADCAST": 1, "ALL_TO_ALL": 1}   # typecheck: arity
_UNARY = ELEMENTWISE - {"ADD", "MUL", "MAXIMUM", "WHERE"}   # NEG ... STOP_GRAD: one argument
MAX_INT = 2**63 - 1  # bound of a plain integer attribute (chunk counts, top-k, coordinates)
MESH_AXES = ("dp", "tp", "pp", "cp", "sp", "ep", "mb", "dp_replicate", "dp_shard")  # spec_lang.term.Axis (mb: micro-batches)

Dims = tuple[tuple[str, tuple[str, ...]], ...]


class DimRef(tuple):
    """A dim spec as an attribute value: ``(name, shards)``; JSON ``{"dim": [name, [shards]]}``."""

    def __new__(cls, name: str, shards: tuple[str, ...]) -> DimRef:
        return super().__new__(cls, (name, tuple(shards)))

    @property
    def name(self) -> str:
        return self[0]

    @property
    def shards(self) -> tuple[str, ...]:
        return self[1]
Node = tuple[str, tuple[int, ...], tuple[Any, ...], Dims]


# -- attributes ---------------------------------------------------------------------------------
def encode_attr(x: Any) -> Any:
    """JSON form of an attribute (see the module docstring). Raises ``KernelMalformed`` when
    ``x`` has no encoding (a float, ``pi``, an int of more than 63 bits)."""
    if x is None or isinstance(x, bool):
        return x
    if isinstance(x, str):  # includes StrEnum members (mesh axes)
        return str(x)
    if isinstance(x, int):
        if not -MAX_INT <= x <= MAX_INT:
            raise KernelMalformed(f"integer attribute of {x.bit_length()} bits (at most 63)")
        return int(x)
    if isinstance(x, (tuple, list)):   # (a DimRef is a tuple: its own form, R32c-2)
        return {"dim": [str(x[0]), [str(a) for a in x[1]]]} if type(x) is DimRef else \
            [encode_attr(y) for y in x]
    if isinstance(x, frozenset):
        return {"set": sorted((encode_attr(y) for y in x), key=canonical_json)}
    if hasattr(x, "name") and hasattr(x, "shards") and not hasattr(x, "op"):  # a DimSpec
        return {"dim": [str(x.name), [str(a) for a in x.shards]]}
    try:
        return encode_number(x)
    except ExactError as e:
        raise KernelMalformed(f"attribute {x!r} of type {type(x).__name__} has no certificate "
                              f"encoding: {e}") from None


def decode_attr(x: Any) -> Any:
    """Inverse of :func:`encode_attr` (lists become tuples); strict: anything else, a
    non-canonical constant or a float is :class:`KernelMalformed`."""
    if x is None or isinstance(x, (bool, str)):
        return x
    if isinstance(x, int):
        if not -MAX_INT <= x <= MAX_INT:
            raise KernelMalformed(f"integer attribute of {x.bit_length()} bits (at most 63)")
        return x
    if isinstance(x, list):
        return tuple(decode_attr(y) for y in x)
    if isinstance(x, dict):
        if set(x) in ({"q"}, {"alg"}):
            try:
                return decode_number(x)
            except ExactError as e:
                raise KernelMalformed(str(e)) from None
        if set(x) == {"set"} and isinstance(x["set"], list):
            keys = [canonical_json(y) for y in x["set"]]    # the encoding's order, no repeats
            if keys != sorted(set(keys)) or len(keys) != len(out := frozenset(
                    decode_attr(y) for y in x["set"])):     # 1 and true are one Python member
                raise KernelMalformed("set attribute not canonical (members sorted, distinct)")
            return out
        if set(x) == {"dim"} and isinstance(x["dim"], list) and len(x["dim"]) == 2 \
                and isinstance(x["dim"][0], str) and isinstance(x["dim"][1], list) \
                and all(isinstance(a, str) for a in x["dim"][1]):
            return DimRef(x["dim"][0], tuple(x["dim"][1]))
    if isinstance(x, float):
        raise KernelMalformed(f"float attribute {x!r}: constants must be exact")
    text = repr(x)
    raise KernelMalformed(f"cannot decode attribute "
                          f"{text if len(text) <= 60 else text[:57] + '...'}")


@contextmanager
def paused_gc() -> Iterator[None]:
    """GC off while a big acyclic table or JSON is built (full passes rescan it); restored after."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def canonical_json(x: Any) -> str:
    return json.dumps(x, sort_keys=True, separators=(",", ":"), ensure_ascii=True)


# -- the table ----------------------------------------------------------------------------------
class NodeTable:
    """Hash-consed nodes, children before parents; ``add`` returns the node's id."""

    def __init__(self) -> None:
        self.nodes: list[Node] = []
        self._index: dict[tuple, int] = {}
        self._akeys: list[Any] = []   # per node: _exact_key of its attrs (its index key's part)

    def __len__(self) -> int:
        return len(self.nodes)

    def add(self, op: str, args: Sequence[int], attrs: Sequence[Any], dims: Dims) -> int:
        key = (op, tuple(args), _exact_key(tuple(attrs)), tuple(dims))
        i = self._index.get(key)
        if i is not None:
            return i
        if op not in OPS:
            raise KernelMalformed(f"unknown op {op!r}")
        for a in args:
            if not (isinstance(a, int) and 0 <= a < len(self.nodes)):
                raise KernelError(f"node {len(self.nodes)} ({op}) refers to node {a}, not an earlier node")
        i = len(self.nodes)
        self.nodes.append((op, tuple(args), tuple(attrs), tuple(dims)))
        self._akeys.append(key[2])
        self._index[key] = i
        return i

    def find(self, op: str, args: Sequence[int], attrs: Sequence[Any], dims: Dims) -> int | None:
        return self._index.get((op, tuple(args), _exact_key(tuple(attrs)), tuple(dims)))

    def find_over(self, n: int, args: tuple[int, ...]) -> int | None:
        """``find`` of node ``n``'s op, attrs and dims over ``args`` (its attrs' key reused)."""
        return self._index.get((self.nodes[n][0], args, self._akeys[n], self.nodes[n][3]))

    def to_json(self) -> list:
        dims_json: dict[Any, list] = {}   # dims tuples (strings only) repeat: encode each once
        attrs_json: dict[Any, list] = {}  # so do attribute tuples (keyed by _exact_key)
        out = []
        for i, (op, args, attrs, dims) in enumerate(self.nodes):
            d = dims_json.get(dims)
            if d is None:
                d = dims_json[dims] = [[n, list(s)] for n, s in dims]
            ka = self._akeys[i] if attrs else ()   # _exact_key(attrs), kept by add / from_json
            a = attrs_json.get(ka)
            if a is None:
                a = attrs_json[ka] = [encode_attr(x) for x in attrs]
            out.append([op, list(args), a, d])
        return out

    @classmethod
    def from_json(cls, data: Any) -> NodeTable:
        """Rebuild a table, rejecting anything malformed or not hash-consed (duplicates).

        Raises:
            KernelMalformed: a row that is not ``[op, args, attrs, dims]`` of those types, an
                unknown op, non-integer args, malformed dims, an attribute without a decoding.
            KernelError: a forward reference or a duplicate row.
        """
        if not isinstance(data, list):
            raise KernelMalformed("nodes must be a list")
        t = cls()
        nodes, index, akeys = t.nodes, t._index, t._akeys
        dims_seen: dict[Dims, Dims] = {}   # validated dims tuples, shared between rows
        for i, row in enumerate(data):
            if type(row) is not list or len(row) != 4:
                raise KernelMalformed(f"node {i} is not [op, args, attrs, dims]")
            op, args, attrs, dims = row
            if type(op) is not str or type(args) is not list or type(attrs) is not list \
                    or type(dims) is not list:
                raise KernelMalformed(f"node {i} has fields of the wrong types")
            if op not in OPS:
                raise KernelMalformed(f"unknown op {op[:40]!r}")
            for d in dims:
                if type(d) is not list or len(d) != 2 or type(d[1]) is not list:
                    raise KernelMalformed(f"node {i} has malformed dims")
            ddims = tuple([(d[0], tuple(d[1])) for d in dims])
            shared = dims_seen.get(ddims)
            if shared is None:
                for name, shards in ddims:
                    if type(name) is not str or not all(type(x) is str for x in shards):
                        raise KernelMalformed(f"node {i} has malformed dims")
                shared = dims_seen[ddims] = ddims
            n = len(nodes)
            for a in args:
                if type(a) is not int:
                    raise KernelMalformed(f"node {i} has non-integer args")
                if not 0 <= a < n:
                    raise KernelError(f"node {n} ({op}) refers to node {a}, not an earlier node")
            dattrs = tuple([x if type(x) is str else decode_attr(x) for x in attrs])
            targs = tuple(args)
            key = (op, targs, _exact_key(dattrs), shared)
            j = index.get(key)
            if j is not None:
                raise KernelError(f"node {i} duplicates node {j} (the table must be hash-consed)")
            index[key] = n
            nodes.append((op, targs, dattrs, shared))
            akeys.append(key[2])
        return t


def _exact_key(x: Any) -> Any:
    """A key equal only for attributes with one encoding: every value tagged with its type,
    inside tuples, lists and sets too (``frozenset({1}) == frozenset({True})``, so a set's
    members are tagged as well). The hash-consing index, memoised encodings and hashes use it."""
    t = type(x)
    if t is tuple or t is list:
        return (t, tuple([_exact_key(y) for y in x]))
    if t is frozenset:
        return (t, frozenset([_exact_key(y) for y in x]))
    return (t, x)


def from_terms(table: NodeTable, roots: Iterable[Any],
               ids: dict[int, int] | None = None) -> dict[int, int]:
    """Add ``spec_lang`` terms (and everything below them) to ``table``.

    Returns ``{id(term): node_id}`` for every node reached (``ids``, extended in place, when
    given: nodes already in it are not walked again). Walks without recursion. The caller keeps
    the terms alive while ``ids`` is in use (ids of dead objects can be reused).
    """
    ids = {} if ids is None else ids
    dims_of: dict[Any, Dims] = {}     # a term's DimSpec tuple -> the table's (name, shards)
    stack: list[tuple[Any, bool]] = [(r, False) for r in roots]
    while stack:
        t, done = stack.pop()
        if id(t) in ids:
            continue
        if done:
            dims = dims_of.get(t.dims)
            if dims is None:
                dims = dims_of[t.dims] = tuple((d.name, tuple(str(s) for s in d.shards))
                                               for d in t.dims)
            ids[id(t)] = table.add(t.op.name, [ids[id(c)] for c in t.args], t.attrs, dims)
            continue
        stack.append((t, True))
        for c in t.args:
            if id(c) not in ids:
                stack.append((c, False))
    return ids


# -- hashing ------------------------------------------------------------------------------------
def node_hash_table(table: NodeTable) -> list[str]:
    """Merkle hash of every node: sha256 over ``canonical_json([op, [child hashes], [encoded
    attrs], [[dim, [shards]]]])``, id-independent; written as its items' canonical JSON joined,
    attrs and dims parts memoised (``tests/proofs/test_node_hashes.py``: as one call per node)."""
    hs: list[str] = []
    attrs_json: dict[Any, str] = {}
    dims_json: dict[Any, str] = {}
    ops_json: dict[str, str] = {}
    sha256 = hashlib.sha256
    for i, (op, args, attrs, dims) in enumerate(table.nodes):
        o = ops_json.get(op)
        if o is None:
            o = ops_json[op] = canonical_json(op)
        ka = table._akeys[i] if attrs else ()   # _exact_key(attrs), kept by add / from_json
        a = attrs_json.get(ka)
        if a is None:
            a = attrs_json[ka] = canonical_json([encode_attr(x) for x in attrs])
        d = dims_json.get(dims)
        if d is None:
            d = dims_json[dims] = canonical_json([[n, list(s)] for n, s in dims])
        kids = ",".join(['"' + hs[i] + '"' for i in args])
        payload = f"[{o},[{kids}],{a},{d}]"
        hs.append(sha256(payload.encode()).hexdigest())
    return hs


def roots_hash(hashes: Sequence[str], named_roots: Iterable[tuple[str, int]],
               binding: Mapping[str, int] | None = None) -> str:
    """sha256 of the named roots' Merkle hashes and of the sizes they are read at (the
    ``spec_sha256`` / ``plan_sha256`` of a certificate: one root per goal, named by the goal;
    the spec hash covers the binding's dim sizes, the plan hash the whole binding)."""
    roots = sorted([name, hashes[i]] for name, i in named_roots)
    if binding is None:
        payload = canonical_json(roots)
    else:
        payload = canonical_json({"binding": {k: int(v) for k, v in binding.items()},
                                  "roots": roots})
    return hashlib.sha256(payload.encode()).hexdigest()


def spec_binding(binding: Mapping[str, int]) -> dict[str, int]:
    """The dim sizes of a binding (the spec's part; mesh axes and ``mb`` are the plan's)."""
    return {k: v for k, v in binding.items() if k not in MESH_AXES}


# -- typing -------------------------------------------------------------------------------------
def typecheck(table: NodeTable, i: int) -> None:
    """Check that node ``i``'s dims follow from its op, attrs and children (shape rules).

    Raises:
        KernelError: naming the node and what is wrong.
    """
    op, args, attrs, dims = table.nodes[i]
    ad = [dict(table.nodes[a][3]) for a in args]
    out = dict(dims)
    names = [n for n, _ in dims]

    def bad(msg: str) -> KernelError:
        return KernelError(f"node {i} ({op}) is ill-typed: {msg}")

    if len(set(names)) != len(names):
        raise bad(f"repeated dim in {names}")
    nargs = _NARGS
    if op in nargs and len(args) != nargs[op]:
        raise bad(f"{len(args)} args, expected {nargs[op]}")
    if op in _UNARY and len(args) != 1:
        raise bad(f"{len(args)} args, expected 1")
    if op in ("ADD", "MUL", "EINSUM", "CONCAT") and not args:
        raise bad("no args")
    if op in ("CONST", "DIM_SIZE", "AXIS_SIZE", "RANK_CONST") and dims:
        raise bad("a scalar leaf has dims")
    if op == "INPUT" and not (
            len(attrs) in (3, 4) and isinstance(attrs[0], str) and attrs[0]
            and attrs[1] in INPUT_KINDS and attrs[2] in INPUT_DOMAINS
            and (len(attrs) == 4) == (attrs[2] == "index")
            and (attrs[1] == "cut") == attrs[0].startswith("cut:")):
        # spec_lang.term's INPUT_KINDS / INPUT_DOMAINS; an index input names its range dim.
        # Adversarial finding R2-7: an unchecked kind ("data:a") let two inputs share a z3 name
        raise bad(f"attrs {attrs!r} are not (name, kind in {INPUT_KINDS}, domain in "
                  f"{INPUT_DOMAINS}[, range dim when the domain is index]), kind cut exactly "
                  "for a name cut:...")
    if op in ELEMENTWISE:
        union: dict[str, tuple[str, ...]] = {}
        for d in ad:
            for n, s in d.items():
                if union.setdefault(n, s) != s:
                    raise bad(f"operands disagree on the shards of dim {n}")
        if union != out:
            raise bad(f"dims {out} are not the union of the operands' {union}")
    elif op == "EINSUM":
        want = tuple(attrs[0]) if attrs else ()
        if tuple(names) != want:
            raise bad(f"dims {names} differ from out_dims {want}")
        union = {}
        for d in ad:
            for n, s in d.items():
                if union.setdefault(n, s) != s:
                    raise bad(f"operands disagree on the shards of dim {n}")
        for n in names:
            if n not in union or union[n] != out[n]:
                raise bad(f"output dim {n} is not an operand dim with the same shards")
    elif op == "REDUCE_MAX":
        want_d = {n: s for n, s in ad[0].items() if n not in set(attrs[0])}
        if want_d != out:
            raise bad("dims are not the operand's minus the reduced dims")
    elif op in ("PART", "ALL_REDUCE", "BROADCAST"):
        if ad[0] != out:
            raise bad("dims differ from the operand's")
    elif op in ("SHARD", "REDUCE_SCATTER"):
        d, a = (attrs[0], attrs[1]) if op == "SHARD" else (attrs[1], attrs[0])
        if d not in ad[0]:
            raise bad(f"operand has no dim {d}")
        want_d = dict(ad[0])
        want_d[d] = ad[0][d] + (a,)
        if want_d != out:
            raise bad(f"dim {d} must gain shard {a}")
    elif op == "ALL_GATHER":
        a, d = attrs[0], attrs[1]
        if d not in ad[0] or not ad[0][d] or ad[0][d][-1] != a:
            raise bad(f"operand dim {d} is not sharded last over {a}")
        want_d = dict(ad[0])
        want_d[d] = ad[0][d][:-1]
        if want_d != out:
            raise bad(f"dim {d} must lose shard {a}")
    elif op == "RENAME":
        old, new = attrs
        if old not in ad[0] or (new in ad[0] and new != old):
            raise bad(f"cannot rename {old} to {new}")
        src = ad[0][old]
        base = src[:-1] if src and src[-1].startswith("#") else src
        got = out.get(new)
        # the dim keeps its placement; a chunk marker may be dropped (a fresh dim of the block's
        # size) or a block marker added (renaming back into block i of n); the checker compares
        # local sizes under the binding
        if got is None or not (got == src or got == base or (
                len(got) == len(base) + 1 and got[:-1] == base and got[-1].startswith("#"))):
            raise bad(f"dim {old}{list(src)} cannot become {new}{list(got or ())}")
        want_d = {n: s for n, s in ad[0].items() if n != old}
        if {n: s for n, s in out.items() if n != new} != want_d:
            raise bad("dims are not the operand's renamed")
    elif op == "CHUNK":
        d, parts, idx = attrs
        if d not in ad[0] or not (isinstance(parts, int) and isinstance(idx, int) and 0 <= idx < parts):
            raise bad("bad chunk")
        want_d = dict(ad[0])
        want_d[d] = ad[0][d] + (f"#{idx}/{parts}",)
        if want_d != out:
            raise bad(f"dim {d} must gain pseudo-shard #{idx}/{parts}")
    elif op == "ONE_HOT":
        d = attrs[0]
        if d in ad[0] or d not in out or {n: s for n, s in out.items() if n != d} != ad[0]:
            raise bad(f"dims must be the indices' plus {d}")
    elif op == "CONCAT":
        d = attrs[0]
        if d not in out:
            raise bad(f"no dim {d}")
        for x in ad:
            if {n: s for n, s in x.items() if n != d} != {n: s for n, s in out.items() if n != d}:
                raise bad("operands' dims differ from the output's")
    elif op == "PERMUTE":
        d, order = attrs
        if d not in out or ad[0] != out or not isinstance(order, tuple) or \
                sorted(order) != list(range(len(order))) or \
                not all(isinstance(j, int) and not isinstance(j, bool) for j in order):
            raise bad(f"PERMUTE along {d} must keep the operand's dims and have a block order")
    elif op == "SHIFT":
        if attrs[0] not in out or ad[0] != out:
            raise bad(f"SHIFT along {attrs[0]} must keep the operand's dims")
    elif op == "TOPK_MASK":  # (x,) or (x, eligible): eligibility has exactly x's dims
        d, k = attrs
        if len(args) not in (1, 2):
            raise bad(f"{len(args)} args, expected 1 or 2")
        if any(a != out for a in ad) or d not in out or out[d] or isinstance(k, bool) \
                or not isinstance(k, int) or k < 1:
            raise bad(f"TOPK_MASK along {d} must keep the operand's dims, {d} unsharded, k >= 1")
    elif op == "ALL_TO_ALL":
        a, sp, cc = attrs
        if sp == cc or sp not in ad[0] or cc not in ad[0] or not ad[0][cc] or ad[0][cc][-1] != a:
            raise bad(f"operand dim {cc} is not sharded last over {a} (or no dim {sp})")
        want_d = dict(ad[0])
        want_d[cc] = ad[0][cc][:-1]
        want_d[sp] = ad[0][sp] + (a,)
        if want_d != out:
            raise bad(f"dim {cc} must lose shard {a} and dim {sp} gain it")
    elif op == "CAUSAL_MASK":
        if tuple(names) != (attrs[0], attrs[1]):
            raise bad("dims must be (q, k)")
    elif op in ("ROPE_COS", "ROPE_SIN"):
        if tuple(names) != (attrs[0], attrs[1]):
            raise bad("dims must be (seq, half)")
    elif op in ("INPUT", "CONST", "DIM_SIZE", "AXIS_SIZE", "RANK_CONST"):
        pass
    else:  # pragma: no cover - OPS is closed and every op is handled above
        raise bad("no shape rule")


_CHUNK_MARKER = re.compile(r"#(0|[1-9][0-9]{0,17})/([1-9][0-9]{0,17})")


def check_sizes(table: NodeTable, binding: dict[str, int]) -> None:
    """Size checks that need the binding, for every node.

    Every dim is in the binding and every shard is a mesh axis of the binding (or a ``CHUNK``
    pseudo-shard ``#i/parts``) dividing what is left of the dim, outermost first; the axes and
    dims named by attributes are in the binding; a ``RENAME`` keeps the local size of its dim; a
    ``CONCAT``'s blocks add up to its dim; a ``RANK_CONST`` has one value per coordinate and a
    ``BROADCAST`` source is a coordinate of its axis.

    Raises:
        KernelError: naming the node.
    """
    for k, v in binding.items():
        if not isinstance(k, str) or isinstance(v, bool) or not isinstance(v, int) or v <= 0:
            raise KernelError(f"binding: size of {k!r} is {v!r}, not a positive integer")

    def local(i: int, name: str, shards: tuple[str, ...]) -> int:
        if name not in binding or name in MESH_AXES:
            raise KernelError(f"node {i}: dim {name} is not a dim of the binding")
        n = binding[name]
        for a in shards:
            if a.startswith("#"):
                m = _CHUNK_MARKER.fullmatch(a)
                if m is None:
                    raise KernelError(f"node {i}: bad chunk marker {a!r} on dim {name}")
                idx, parts = int(m.group(1)), int(m.group(2))
                if not 0 <= idx < parts:
                    raise KernelError(f"node {i}: bad chunk marker {a!r} on dim {name}")
                k = parts
            elif a in MESH_AXES and a in binding:
                k = binding[a]
            else:
                raise KernelError(f"node {i}: dim {name} is sharded over {a!r}, not a mesh axis "
                                  f"of the binding")
            if n % k:
                raise KernelError(f"node {i}: dim {name} (size {binding[name]}) does not divide "
                                  f"over {list(shards)}")
            n //= k
        return n

    def axis(i: int, a: Any) -> int:
        if not isinstance(a, str) or a not in MESH_AXES or a not in binding:
            raise KernelError(f"node {i}: {a!r} is not a mesh axis of the binding")
        return binding[a]

    sized: dict[Any, dict[str, int]] = {}   # dims -> local sizes (rows share dims tuples)
    for i, (op, args, attrs, dims) in enumerate(table.nodes):
        if (sizes := sized.get(dims)) is None:
            sizes = sized[dims] = {n: local(i, n, s) for n, s in dims}
        if op == "RENAME":
            old, new = attrs
            src = dict(table.nodes[args[0]][3])[old]
            if local(i, old, src) != sizes[new]:
                raise KernelError(f"node {i} (RENAME {old} -> {new}) changes the local size")
        elif op == "CONCAT":
            d = attrs[0]
            blocks = [dict(table.nodes[a][3]).get(d) for a in args]
            if all(b is not None for b in blocks) and \
                    sum(local(i, d, b) for b in blocks) != sizes[d]:
                raise KernelError(f"node {i} (CONCAT along {d}): the blocks do not add up to "
                                  f"the dim's local size {sizes[d]}")
        elif op == "PERMUTE":
            if sizes[attrs[0]] % len(attrs[1]):
                raise KernelError(f"node {i} (PERMUTE along {attrs[0]}): {len(attrs[1])} blocks "
                                  f"do not divide the dim's local size {sizes[attrs[0]]}")
        elif op in ("PART", "ALL_REDUCE", "ALL_GATHER", "REDUCE_SCATTER", "AXIS_SIZE",
                    "ALL_TO_ALL"):
            axis(i, attrs[0])
        elif op == "SHARD":
            axis(i, attrs[1])
        elif op == "BROADCAST":
            n = axis(i, attrs[0])
            if isinstance(attrs[1], bool) or not isinstance(attrs[1], int) \
                    or not 0 <= attrs[1] < n:
                raise KernelError(f"node {i} (BROADCAST): source {attrs[1]!r} is not a "
                                  f"coordinate of {attrs[0]} (size {n})")
        elif op == "RANK_CONST":
            n = axis(i, attrs[0])
            if not isinstance(attrs[1], tuple) or len(attrs[1]) != n:
                raise KernelError(f"node {i} (RANK_CONST over {attrs[0]}): not one value per "
                                  f"coordinate (size {n})")
        elif op == "DIM_SIZE" or (op == "INPUT" and len(attrs) > 3):
            d = attrs[0] if op == "DIM_SIZE" else attrs[3]
            if not isinstance(d, str) or d not in binding or d in MESH_AXES:
                raise KernelError(f"node {i} ({op}): {d!r} is not a dim of the binding")
