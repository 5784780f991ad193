"""Named dims for positional tensors: the finest factorisation of every tensor dim into *atoms*.

A torch tensor dim is a product of named dims in row-major order: after
``xq.view(bs, seqlen, -1, head_dim)`` the projection's output dim is ``(heads, head_dim)``, and
after GQA's ``expand`` + ``reshape`` the query heads are ``(kv_heads, n_rep)``. The IR has no
reshape (``spec_lang/term.py``: dims are named, storage order carries no meaning), so every dim of
every captured tensor is written as a list of atoms and views become free.

:class:`Dims` is a union-find over atoms (one per trace), built in program order by the dims
rules of :mod:`spec_lang.torch_frontend.rules`:

* ``unify(a, b)``: two atoms are the same named dim (a contraction, an elementwise op);
* ``split(a, sizes)``: an atom is the row-major product of smaller atoms (a view);
* ``same(d1, d2)`` / ``regroup(atoms, shape)``: equal or regrouped dims, splitting atoms where
  their sizes require it (so ``(6, 10) -> (60,)`` and ``(60,) -> (6, 10)`` both work; a view that
  no refinement explains raises :class:`DimsError`).

Two dims of one input are never one named dim (an IR term has each name once): ``mark_apart``
keeps the dims of a square weight ``nn.Linear(h, h)`` applied to its own output (``h + sq(h)``,
a layer applied twice) *twins*, two named dims of equal size that ops combining them rename
position by position, as copies (``related``). A plan trace reads the spec's twins from their
keys (``twin_keys``).

A dim of size 1 is the empty product (no atom), so ``unsqueeze`` and broadcasting need no atom.

In a plan trace every atom also carries its *lineage* (:attr:`Atom.info`): the spec atom it is a
block of and the mesh axes sharding it (``("seq", ("tp",))`` on a sequence-parallel rank). The
plan's inputs are seeded from the spec's atoms through their placements (the shard goes to the
outermost atom of the sharded dim); collectives add or remove a shard.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

__all__ = ["Atom", "Dims", "DimsError", "Info", "Marks", "Refine"]

Info = tuple[str, tuple[str, ...]]   # (spec atom key, shards outermost first)


class DimsError(ValueError):
    """The dims of a node cannot be named (a view no factorisation explains, a contraction of
    different named dims, a shard that does not divide). The message names the node."""


class Refine(Exception):  # noqa: N818 -- control flow: restart with a finer spec atom
    """A plan view splits a spec atom: the spec must be re-analysed with ``key`` split into
    ``sizes`` (global sizes, row-major); ``where`` is the plan's op that splits it (the user's
    ``file:line``, for the message when the refinements do not converge)."""

    def __init__(self, key: str, sizes: tuple[int, ...], where: str = ""):
        super().__init__(f"refine {key} into {sizes}")
        self.key, self.sizes, self.where = key, sizes, where


def _refine(key: str, sizes: tuple[int, ...], where: str) -> Exception:
    """The ``Refine`` that splits spec atom ``key`` into ``sizes``, or a ``DimsError`` when a
    part would be a unit dim: splitting into ``(1, n)`` names nothing new, and re-analysing
    meets the same split one level deeper (pytorch #179502's faulty view,
    ``tests/torch_frontend/test_dtensor_bugs.py``)."""
    if 1 in sizes:
        return DimsError(f"{where}: a local view splits the spec's dim {key} into sizes "
                         f"{list(sizes)}, not a block of its named dims")
    return Refine(key, sizes, where)


_MISSING = object()


class Marks(dict):
    """``Analysis.marks``, the facts rules leave for later rules: item assignments (and
    ``setdefault``) are recorded in the open :meth:`Dims.transaction`, so a rule that fails
    leaves none behind. Rules replace a value rather than mutate it in place."""

    log: list | None = None

    def __setitem__(self, key: Any, value: Any) -> None:
        if self.log is not None:
            self.log.append((self, key, self.get(key, _MISSING)))
        super().__setitem__(key, value)

    def setdefault(self, key: Any, default: Any = None) -> Any:
        if key not in self:
            self[key] = default
        return self[key]


@dataclass(eq=False)
class Atom:
    """A union-find element: a named dim of local ``size``.

    ``parts``: the atoms it factors into (row-major), or None for a leaf. ``info``: lineage in a
    plan trace. ``origin``: where it was created (for messages).
    """

    uid: int
    size: int
    origin: str
    parent: Atom | None = None
    parts: list[Atom] | None = None
    info: Info | None = None
    key: str | None = None                  # spec: "<input>#<dim>[.<part>]"; names the atom
    piece: tuple[Atom, int, int] | None = None   # block i of n of an atom (slice / split)
    rank_axis: str | None = None            # the rank index of an all-gather's stacked dim
    copy_of: Atom | None = None             # a second copy of a dim in one tensor (scores' keys)
    apart: list[Atom] | None = None         # (on a root) atoms of other classes it is a twin of

    def __repr__(self) -> str:
        return f"a{self.uid}:{self.size}" + (f"<{self.info[0]}{list(self.info[1])}>"
                                             if self.info else "")


class Dims:
    """The atoms of one trace (see the module docstring).

    ``axis_sizes``: mesh axis -> size (to size a shard in :meth:`shard_of`).
    ``global_size``: spec atom key -> global size (for lineage checks and refinements).
    """

    def __init__(self, axis_sizes: dict[str, int] | None = None,
                 global_size: dict[str, int] | None = None,
                 twin_keys: Iterable[frozenset[str]] = ()):
        self.atoms: list[Atom] = []
        self.axis_sizes = dict(axis_sizes or {})
        self.global_size = dict(global_size or {})
        # spec atom keys that are twins (a plan trace: lineage keys kept apart by the spec)
        self.twin_keys = frozenset(twin_keys)
        # pairs of twin classes that met (a combination :meth:`unify` left apart)
        self.twins_met: list[tuple[Atom, Atom]] = []
        self._log: list[tuple[Any, Any, Any]] | None = None   # the open transaction's undo log

    @contextmanager
    def transaction(self, marks: Marks | None = None) -> Iterator[None]:
        """One op's rule (or one :meth:`same`): on :class:`DimsError` every change made inside
        to the atoms (joins, path compression, splits, lineage, copies, twins), the atoms and
        twins created and the writes to ``marks`` is undone before the error propagates
        (round 53a, R53a-1: a ``same`` that failed at its second pair left the first joined,
        and a dim of no spec origin kept a spec name). Transactions nest."""
        outer = self._log is not None
        log = self._log if outer else []
        start, n_atoms, n_twins = len(log), len(self.atoms), len(self.twins_met)
        self._log = log
        if marks is not None:
            marks.log = log
        try:
            yield
        except DimsError:
            for obj, key, old in reversed(log[start:]):
                if isinstance(obj, Marks):
                    if old is _MISSING:
                        dict.pop(obj, key, None)
                    else:
                        dict.__setitem__(obj, key, old)
                else:
                    setattr(obj, key, old)
            del log[start:], self.atoms[n_atoms:], self.twins_met[n_twins:]
            raise
        finally:
            if not outer:
                self._log = None
                if marks is not None:
                    marks.log = None

    def set(self, obj: Any, attr: str, value: Any) -> None:
        """``setattr(obj, attr, value)``, recorded in the open transaction."""
        if self._log is not None:
            self._log.append((obj, attr, getattr(obj, attr)))
        setattr(obj, attr, value)

    # -- union-find ---------------------------------------------------------------------------
    def fresh(self, size: int, origin: str, info: Info | None = None) -> Atom:
        if size < 1:
            raise DimsError(f"{origin}: dim of size {size}")
        a = Atom(len(self.atoms), size, origin, info=info)
        self.atoms.append(a)
        return a

    def find(self, a: Atom) -> Atom:
        root = a
        while root.parent is not None:
            root = root.parent
        while a.parent is not None:  # path compression
            nxt = a.parent
            if nxt is not root:
                self.set(a, "parent", root)
            a = nxt
        return root

    def leaves(self, a: Atom) -> list[Atom]:
        """The leaf atoms of ``a`` in row-major order."""
        out: list[Atom] = []
        stack = [self.find(a)]
        while stack:
            x = self.find(stack.pop())
            if x.parts is None:
                out.append(x)
            else:
                stack.extend(reversed(x.parts))
        return out

    def canon(self, dim: Iterable[Atom]) -> list[Atom]:
        """A dim (list of atoms) as its leaf atoms."""
        out: list[Atom] = []
        for a in dim:
            out.extend(self.leaves(a))
        return out

    def copy_root(self, a: Atom) -> Atom:
        r = self.find(a)
        while r.copy_of is not None:
            r = self.find(r.copy_of)
        return r

    def related(self, a: Atom, b: Atom) -> bool:
        """``a`` and ``b`` are copies of one named dim (e.g. the query and key positions of
        self-attention scores) or twins (two dims of one input: :meth:`mark_apart`): ops
        combining them rename one, never unify them."""
        ra, rb = self.find(a), self.find(b)
        if ra is rb:
            return False
        if self.copy_root(ra) is self.copy_root(rb):
            return True
        if self._twins(ra, rb):
            return True
        if ra.info is not None and rb.info is not None and ra.info[1] == rb.info[1]:
            return ra.info[0].rstrip("'") == rb.info[0].rstrip("'") and ra.info != rb.info
        return False

    def _twins(self, ra: Atom, rb: Atom) -> bool:
        """Roots ``ra`` and ``rb`` are twins: two dims of one input (:meth:`mark_apart`) or, in
        a plan trace, of the spec's twin keys (with the same shards)."""
        if ra.size != rb.size:
            return False
        if self._apart(ra, rb):
            self.twins_met.append((ra, rb))
            return True
        return (ra.info is not None and rb.info is not None and ra.info[1] == rb.info[1]
                and frozenset((ra.info[0], rb.info[0])) in self.twin_keys)

    def twin_for(self, a: Atom, exclude: Sequence[Atom], where: str) -> Atom | None:
        """The one twin of ``a`` of its size that no atom of ``exclude`` is (a layout holding
        ``a`` twice names the second occurrence by it, as the input whose dims they are does),
        or None when there is not exactly one: in a plan trace a fresh atom with the twin key's
        lineage."""
        r = self.find(a)
        ex = {id(self.find(x)) for x in exclude}
        if r.info is not None and self.twin_keys:
            key, shards = r.info
            ex_keys = {self.find(x).info[0] for x in exclude if self.find(x).info is not None}
            keys = {k for pair in self.twin_keys if key in pair for k in pair
                    if k != key and k not in ex_keys}
            if len(keys) != 1:
                return None
            return self.fresh(r.size, where, (keys.pop(), shards))
        cands = {id(q): q for q in (self.find(x) for x in (r.apart or ()))
                 if q.size == r.size and id(q) not in ex}
        return next(iter(cands.values())) if len(cands) == 1 else None

    def mark_apart(self, atoms: Sequence[Atom]) -> None:
        """The leaf atoms of one input's dims are pairwise twins: never unified (an input
        with one named dim twice would be ill-typed), renamed where they meet."""
        roots = []
        for x in atoms:
            r = self.find(x)
            if all(r is not q for q in roots):
                roots.append(r)
        if len(roots) < 2:
            return
        for r in roots:
            self.set(r, "apart", (r.apart or []) + [q for q in roots if q is not r])

    def _apart(self, ra: Atom, rb: Atom) -> bool:
        """Roots ``ra`` and ``rb`` hold two dims of one input (the relation is symmetric: the
        shorter list is searched)."""
        if not ra.apart or not rb.apart:
            return False
        if len(rb.apart) < len(ra.apart):
            ra, rb = rb, ra
        return any(self.find(x) is rb for x in ra.apart)

    def _join(self, child: Atom, root: Atom) -> None:
        """Union: ``child`` (a root) under ``root``, which takes over its twins."""
        self.set(child, "parent", root)
        if child.apart:
            self.set(root, "apart", (root.apart or []) + child.apart)
            self.set(child, "apart", None)

    def copy(self, a: Atom, where: str) -> Atom:
        """A second copy of ``a`` for a tensor that has ``a`` twice (attention scores)."""
        r = self.find(a)
        c = self.fresh(r.size, where)
        self.set(c, "copy_of", r)
        if r.info is not None:
            self.set(c, "info", (r.info[0] + "'", r.info[1]))
        return c

    def unify(self, a: Atom, b: Atom, where: str) -> None:
        """``a`` and ``b`` are the same named dim.

        Raises:
            DimsError: different sizes, or different lineage in a plan trace.
            Refine: lineage forces a spec atom to split.
        """
        ra, rb = self.find(a), self.find(b)
        if ra is rb:
            return
        if self.related(ra, rb):
            return
        if ra.size != rb.size:
            raise DimsError(f"{where}: dims of sizes {ra.size} and {rb.size} are combined")
        if ra.parts is not None or rb.parts is not None:
            pa = ra.parts if ra.parts is not None else [ra]
            pb = rb.parts if rb.parts is not None else [rb]
            if ra.parts is None:
                ra, rb = rb, ra
                pa, pb = pb, pa
            # ra has parts; rb is a leaf or has parts: align them
            if rb.parts is None:
                if rb.info is not None:
                    self._distribute(rb, ra.parts, where)  # type: ignore[arg-type]
                self._join(rb, ra)
                return
            self._join(rb, ra)
            self.same(list(pa), list(pb), where)
            return
        if ra.info is not None and rb.info is not None and ra.info != rb.info:
            raise DimsError(f"{where}: combines {_show(ra.info)} with {_show(rb.info)}")
        if ra.info is None:
            self.set(ra, "info", rb.info)
        self._join(rb, ra)

    def _distribute(self, leaf: Atom, parts: list[Atom], where: str) -> None:
        """A leaf with lineage becomes the product of ``parts``: the spec atom must split."""
        key, shards = leaf.info  # type: ignore[misc]
        sizes = [self.find(p).size for p in parts]
        k = 1
        for s in shards:
            k *= self._axis(s, where)
        raise _refine(key, (sizes[0] * k,) + tuple(sizes[1:]), where)

    def split(self, a: Atom, sizes: Sequence[int], where: str) -> list[Atom]:
        """Factor ``a`` into atoms of ``sizes`` (row-major); returns the parts' leaves grouped.

        Raises:
            DimsError: the product of ``sizes`` is not ``a``'s size.
            Refine: ``a`` has lineage (a plan view splits a spec atom).
        """
        r = self.find(a)
        prod = 1
        for s in sizes:
            prod *= s
        if prod != r.size:
            raise DimsError(f"{where}: cannot split a dim of size {r.size} into {list(sizes)}")
        if len(sizes) == 1:
            return [r]
        if r.parts is not None:
            # already factored: regroup its leaves into the requested sizes
            groups = self.regroup(self.leaves(r), sizes, where)
            return [g[0] if len(g) == 1 else self._merged(g, where) for g in groups]
        if r.info is not None:
            key, shards = r.info
            k = 1
            for s in shards:
                k *= self._axis(s, where)
            raise _refine(key, (sizes[0] * k,) + tuple(sizes[1:]), where)
        self.set(r, "parts", [self.fresh(s, where) for s in sizes])
        if r.key is not None:
            for i, p in enumerate(r.parts):
                self.set(p, "key", f"{r.key}.{i}")
        return list(r.parts)

    def _merged(self, group: list[Atom], where: str) -> Atom:
        """An atom standing for a run of leaves (a dim that is their product)."""
        size = 1
        for g in group:
            size *= g.size
        m = self.fresh(size, where)
        self.set(m, "parts", list(group))
        return m

    def regroup(self, atoms: Sequence[Atom], shape: Sequence[int], where: str
                ) -> list[list[Atom]]:
        """Cut the row-major run ``atoms`` into dims of ``shape`` (a view), splitting atoms
        where a dim boundary falls inside one. Size-1 dims get no atom.

        Raises:
            DimsError: the sizes do not fit (a view that mixes named dims).
        """
        stream = list(self.canon(atoms))
        out: list[list[Atom]] = []
        i = 0
        for n in shape:
            if n == 1:
                out.append([])
                continue
            group: list[Atom] = []
            have = 1
            while have < n:
                if i >= len(stream):
                    raise DimsError(f"{where}: view to {list(shape)} does not fit the dims "
                                    f"{_sizes(stream)}")
                a = stream[i]
                if n % (have * a.size) == 0:
                    group.append(a)
                    have *= a.size
                    i += 1
                    continue
                need = n // have
                if n % have or a.size % need:
                    raise DimsError(f"{where}: view to {list(shape)} splits a dim of size "
                                    f"{a.size} by {need}, which does not divide it")
                first, rest = self.split(a, (need, a.size // need), where)
                stream[i:i + 1] = self.leaves(first) + self.leaves(rest)
            if have != n:
                raise DimsError(f"{where}: view to {list(shape)} does not fit the dims "
                                f"{_sizes(stream)}")
            out.append(group)
        if i != len(stream):
            raise DimsError(f"{where}: view to {list(shape)} leaves dims {_sizes(stream[i:])}")
        return out

    def same(self, d1: Sequence[Atom], d2: Sequence[Atom], where: str) -> None:
        """Two dims (atom lists) of equal size are the same dim: align and unify atom by atom,
        splitting the larger atom where the boundaries differ; all or nothing (a
        :meth:`transaction`).

        Raises:
            DimsError: the dims do not align (nothing joined); Refine: see :meth:`split`.
        """
        with self.transaction():
            self._same(d1, d2, where)

    def _same(self, d1: Sequence[Atom], d2: Sequence[Atom], where: str) -> None:
        a, b = list(self.canon(d1)), list(self.canon(d2))
        i = j = 0
        while i < len(a) and j < len(b):
            x, y = self.find(a[i]), self.find(b[j])
            if x is y or (x.size == y.size and self.related(x, y)):
                i += 1
                j += 1
                continue
            if x.size == y.size:
                self.unify(x, y, where)
                i += 1
                j += 1
            elif x.size > y.size:
                if x.size % y.size:
                    raise DimsError(f"{where}: dims {_sizes(a)} and {_sizes(b)} do not align")
                p, q = self.split(x, (y.size, x.size // y.size), where)
                a[i:i + 1] = self.leaves(p) + self.leaves(q)
            else:
                if y.size % x.size:
                    raise DimsError(f"{where}: dims {_sizes(a)} and {_sizes(b)} do not align")
                p, q = self.split(y, (x.size, y.size // x.size), where)
                b[j:j + 1] = self.leaves(p) + self.leaves(q)
        if i != len(a) or j != len(b):
            raise DimsError(f"{where}: dims {_sizes(a)} and {_sizes(b)} differ in size")

    # -- lineage (plan traces) ----------------------------------------------------------------
    def _axis(self, shard: str, where: str) -> int:
        if shard.startswith("#"):
            return int(shard.split("/")[1])
        if shard not in self.axis_sizes:
            raise DimsError(f"{where}: unknown mesh axis {shard!r}")
        return self.axis_sizes[shard]

    def info(self, a: Atom) -> Info | None:
        return self.find(a).info

    def gathered(self, a: Atom, axis: str, where: str) -> Atom:
        """The atom of which ``a`` (sharded last over ``axis``) is this rank's block."""
        r = self.find(a)
        if r.info is None:
            raise DimsError(f"{where}: all-gather over {axis!r} of a dim whose lineage is unknown")
        key, shards = r.info
        if not shards or shards[-1] != axis:
            raise DimsError(f"{where}: all-gather over {axis!r} of {_show(r.info)}, which is not "
                            f"sharded over {axis!r} last")
        return self.fresh(r.size * self.axis_sizes[axis], where, (key, shards[:-1]))

    def scattered(self, a: Atom, axis: str, where: str) -> Atom:
        """This rank's block over ``axis`` of ``a``."""
        r = self.find(a)
        n = self.axis_sizes[axis]
        if r.size % n:
            raise DimsError(f"{where}: {axis!r} (size {n}) does not divide a dim of size "
                            f"{r.size}")
        if r.info is None:
            raise DimsError(f"{where}: reduce-scatter over {axis!r} of a dim whose lineage is "
                            "unknown")
        key, shards = r.info
        return self.fresh(r.size // n, where, (key, shards + (axis,)))


def _sizes(atoms: Sequence[Atom]) -> list[int]:
    return [a.size for a in atoms]


def _show(info: Info) -> str:
    key, shards = info
    return key + (f"[{','.join(shards)}]" if shards else "")
