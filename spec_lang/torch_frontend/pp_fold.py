"""Micro-batches of a pipelined step as the DSL's micro-batch axis ``mb`` (issue 11;
``docs/torch.md``, "Pipelining").

A pipeline schedule cuts each batch input into ``n`` equal micro-batches along dim 0 and runs
every stage once per micro-batch; the traced graph holds one copy of the forward and backward
per micro-batch, micro-batch ``i`` reading block ``i`` of ``n`` of the batch dim (``CHUNK(x, B,
n, i)``, its dims tagged with the pseudo-shard ``#i/n``), and the gradient buffers add the
copies up. A sum written over explicit chunks is a documented miss of the rewriting
(``docs/rules.md``: "A sum written over explicit chunks"); a sum over the shards of an axis
with ``ALL_REDUCE`` is proved. So the composed plan's terms are rewritten, exactly:

    t_0 + t_1 + ... + t_{n-1}  =  ALL_REDUCE(G, mb)     when  phi_i(t_i) = G  for every i

where ``phi_i`` replaces, in the batch dims the schedule cut (``mb_dims``), the pseudo-shard
``#i/n`` by the axis ``mb`` (of size ``n``) and ``CHUNK(x, B, n, i)`` by ``SHARD(x, B, mb)``.
Why it is an identity: evaluated on rank ``i`` of ``mb``, ``SHARD(x, B, mb)`` is block ``i``
of ``n`` of ``x`` along ``B``, which is ``CHUNK(x, B, n, i)``, and a dim sharded over ``mb``
has the size of one tagged ``#i/n``; every other node of ``G`` is the node of ``t_i``. So
``G`` on rank ``i`` is ``t_i``, and the all-reduce over ``mb`` is their sum. ``mb`` is the DSL's
micro-batch axis (``spec_lang.term.Axis.MB``), not a mesh axis of the user's. Operands that
do not line up (a micro-batch missing, one counted twice, a summand that reads two
micro-batches, one computed differently) are left as they are: the goal then stays a sum over
chunks, which the refuter still evaluates exactly and the rewriting does not prove (UNKNOWN).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from spec_lang.term import Axis, DimSpec, Op, Term, term, walk

__all__ = ["MB", "fold_microbatches"]

MB = str(Axis.MB)


def _tag(i: int, n: int) -> str:
    return f"#{i}/{n}"


class _Folder:
    def __init__(self, n: int, mb_dims: Iterable[str]):
        self.n = n
        self.mb_dims = frozenset(mb_dims)
        self.tags = {_tag(i, n): i for i in range(n)}
        self.done: dict[Term, Term] = {}
        self.idx: dict[Term, frozenset[int]] = {}
        self.phi: list[dict[Term, Term]] = [{} for _ in range(n)]

    # -- the micro-batch indices a term reads ---------------------------------------------
    def _own(self, t: Term) -> set[int]:
        out: set[int] = set()
        for d in t.dims:
            if d.name in self.mb_dims:
                out.update(self.tags[s] for s in d.shards if s in self.tags)
        for a in t.attrs:
            if isinstance(a, DimSpec) and a.name in self.mb_dims:
                out.update(self.tags[s] for s in a.shards if s in self.tags)
        if t.op is Op.CHUNK and t.attrs[0] in self.mb_dims and t.attrs[1] == self.n:
            out.add(int(t.attrs[2]))
        return out

    def indices(self, t: Term) -> frozenset[int]:
        got = self.idx.get(t)
        if got is None:
            s = self._own(t)
            for a in t.args:
                s |= self.indices(a)
            got = self.idx[t] = frozenset(s)
        return got

    # -- phi_i ----------------------------------------------------------------------------
    def _spec(self, d: DimSpec, tag: str) -> DimSpec:
        if d.name not in self.mb_dims or tag not in d.shards:
            return d
        return DimSpec(d.name, tuple(MB if s == tag else s for s in d.shards))

    def map(self, i: int, root: Term) -> Term:
        memo, tag = self.phi[i], _tag(i, self.n)
        for t in walk(root):
            if t in memo:
                continue
            args = tuple(memo[a] for a in t.args)
            dims = tuple(self._spec(d, tag) for d in t.dims)
            attrs = tuple(self._spec(a, tag) if isinstance(a, DimSpec) else a for a in t.attrs)
            if (t.op is Op.CHUNK and t.attrs[0] in self.mb_dims and t.attrs[1] == self.n
                    and int(t.attrs[2]) == i):
                memo[t] = term(Op.SHARD, args, (t.attrs[0], MB), dims)
            elif args == t.args and dims == t.dims and attrs == t.attrs:
                memo[t] = t
            else:
                memo[t] = term(t.op, args, attrs, dims)
        return memo[root]

    # -- the fold -------------------------------------------------------------------------
    def fold(self, root: Term) -> Term:
        for t in walk(root):
            if t in self.done:
                continue
            args = tuple(self.done[a] for a in t.args)
            new = t if args == t.args else term(t.op, args, t.attrs, t.dims)
            if new.op is Op.ADD:
                new = self._fold_add(new)
            self.done[t] = new
        return self.done[root]

    def _fold_add(self, t: Term) -> Term:
        ops: list[Term] = []
        stack = list(reversed(t.args))
        while stack:                      # flatten nested sums (the buffer's running adds)
            x = stack.pop()
            if x.op is Op.ADD and x.dims == t.dims:
                stack.extend(reversed(x.args))
            else:
                ops.append(x)
        groups: dict[Term, dict[int, int]] = {}
        for k, x in enumerate(ops):
            ix = self.indices(x)
            if len(ix) != 1:
                continue
            (i,) = ix
            g = self.map(i, x)
            groups.setdefault(g, {})
            if i in groups[g]:
                groups[g][i] = -1         # micro-batch i counted twice: not folded
            else:
                groups[g][i] = k
        used: set[int] = set()
        folded: list[Term] = []
        for g, per in groups.items():
            if sorted(per) == list(range(self.n)) and all(k >= 0 for k in per.values()):
                used.update(per.values())
                folded.append(term(Op.ALL_REDUCE, (g,), (MB, "sum"), g.dims))
        if not folded:
            return t
        from spec_lang.torch_frontend.values import ew

        rest = [x for k, x in enumerate(ops) if k not in used] + folded
        return rest[0] if len(rest) == 1 else ew(Op.ADD, *rest, attrs=t.attrs)


def fold_microbatches(roots: Mapping[str, Term], n: int, mb_dims: Iterable[str]
                      ) -> dict[str, Term]:
    """Each root with its sums over the ``n`` micro-batches folded (module docstring)."""
    f = _Folder(n, mb_dims)
    return {k: f.fold(t) for k, t in roots.items()}


def reads_microbatch(t: Term, n: int, mb_dims: Iterable[str]) -> bool:
    """``t`` still reads one micro-batch's block (an unfolded sum)."""
    return bool(_Folder(n, mb_dims).indices(t))

