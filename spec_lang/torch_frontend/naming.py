"""IR names and real sizes of the atoms (``FRONTEND.md``, design 5: probe and real sizes).

Every leaf atom of the spec gets a *key* (stable across re-analyses: the first input dim it
belongs to, ``"layers.0.attention.wq.weight#0.1"``, or the block of a keyed atom it is) and a
readable IR name from its probe size: the probe size of each named size in ``SIZES`` is a
distinct prime times the mesh factor, so an atom of probe size ``p_heads * m * p_hd * m`` is
``n_heads_head_dim``. A plan atom is named by its lineage (the spec key it is a block of, and
its shards).

Real sizes come from the real-size traces: each torch dim's real size is the product of its
atoms' real sizes; solved atom by atom and then checked on every dim of every node (a graph whose
structure depends on the sizes fails this check, and the caller reports it).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.fx as fx

from spec_lang.term import DimSpec
from spec_lang.torch_frontend.analysis import Analysis, align_sizes, semantic_nodes
from spec_lang.torch_frontend.dims import Atom, Dims

__all__ = ["Names", "spec_names", "plan_namer", "solve_real_sizes", "SizeMismatch", "twin_keys",
           "real_shape_of",
           "positional_names"]


class SizeMismatch(ValueError):
    """The real-size trace does not have the shapes the probe trace's named dims predict."""


@dataclass
class Names:
    """Spec atom keys -> IR names and sizes."""

    key_of: dict[int, str]          # id(leaf root) -> key
    name_of_key: dict[str, str]     # key -> IR dim name
    probe_size: dict[str, int]      # IR name -> global probe size
    real_size: dict[str, int] = field(default_factory=dict)


def _member_keys(d: Dims) -> dict[int, list[tuple[int, str | None, Any, Any]]]:
    by_root: dict[int, list[tuple[int, str | None, Any, Any]]] = {}
    for a in d.atoms:
        r = d.find(a)
        if r.parts is not None:
            continue
        by_root.setdefault(id(r), []).append((a.uid, a.key, a.piece, a.copy_of))
    return by_root


def spec_keys(d: Dims) -> dict[int, str]:
    """id(leaf root) -> key: the first keyed member (creation order), a block's key derived from
    its parent's, else ``~<uid>``."""
    members = _member_keys(d)
    keys: dict[int, str] = {}
    pending = sorted(members.items(), key=lambda kv: min(m[0] for m in kv[1]))
    for _ in range(4):  # blocks of blocks and copies resolve in later rounds
        for rid, ms in pending:
            if rid in keys:
                continue
            for _uid, key, piece, copy_of in sorted(ms, key=lambda m: m[0]):
                if key is not None:
                    keys[rid] = key
                    break
                if piece is not None:
                    parent, i, n = piece
                    pk = keys.get(id(d.find(parent)))
                    if pk is not None:
                        keys[rid] = f"{pk}@{i}of{n}"
                        break
                if copy_of is not None:
                    ck = keys.get(id(d.find(copy_of)))
                    if ck is not None:
                        keys[rid] = ck + "'"
                        break
    for rid, ms in pending:
        keys.setdefault(rid, f"~{min(m[0] for m in ms)}")
    return keys


def _readable(size: int, probe: Mapping[str, int], mesh_factor: int) -> str:
    """A name for a probe size: the named sizes whose primes divide it, joined by ``_``, with
    a ``_half`` / ``_d<k>`` / ``_x<k>`` remainder."""
    names: list[str] = []
    rest = size
    for k, v in probe.items():
        p = v // mesh_factor
        while rest % p == 0 and p > 1:
            rest //= p
            names.append(k)
    if not names:
        return f"d{size}"
    base = 1
    for k in names:
        base *= probe[k]
    # base includes one mesh factor per name; rest is what is left after the primes
    from fractions import Fraction
    r = Fraction(size, base)
    tag = "_".join(names)
    if r == 1:
        return tag
    if r.numerator != 1 or mesh_factor ** len(names) % r.denominator:
        return f"d{size}"      # not a named size divided by mesh factors: no readable name
    if r.numerator == 1:
        return f"{tag}_half" if r.denominator == 2 else f"{tag}_d{r.denominator}"
    return f"{tag}_x{r.numerator}" + (f"_d{r.denominator}" if r.denominator != 1 else "")


def spec_names(a: Analysis, probe: Mapping[str, int], mesh_factor: int) -> Names:
    """Keys and IR names of the spec's atoms (see the module docstring)."""
    d = a.dims
    keys = spec_keys(d)
    sizes: dict[str, int] = {}
    first: dict[str, int] = {}
    for x in d.atoms:
        r = d.find(x)
        key = keys.get(id(r))
        if key is None:
            continue
        sizes.setdefault(key, r.size)
        first.setdefault(key, x.uid)
    name_of: dict[str, str] = {}
    used: dict[str, int] = {}
    for key in sorted(set(keys.values()), key=lambda k: first.get(k, 0)):
        if key.endswith("'") and key[:-1] in name_of:
            name_of[key] = name_of[key[:-1]] + "_k"
            continue
        base = _readable(sizes[key], probe, mesh_factor)
        k = used.get(base, 0)
        used[base] = k + 1
        name_of[key] = base if k == 0 else f"{base}_{k + 1}"
    return Names(keys, name_of, {name_of[k]: s for k, s in sizes.items()})


def twin_keys(a: Analysis, names: Names) -> frozenset[frozenset[str]]:
    """The key pairs of the spec's twin dims of one size (two dims of one input:
    ``Dims.mark_apart``), for the plan traces' ``Dims``: a plan combining atoms of the two keys
    renames one, as the spec does."""
    d = a.dims
    out = set()
    for x in d.atoms:
        r = d.find(x)
        if r is not x or not r.apart:
            continue
        kr = names.key_of.get(id(r))
        for y in r.apart:
            q = d.find(y)
            kq = names.key_of.get(id(q))
            if q is not r and q.size == r.size and kr is not None and kq is not None \
                    and kq != kr:
                out.add(frozenset((kr, kq)))
    return frozenset(out)


def positional_names(spec_out: Mapping[str, Any], plan_out: Mapping[str, Any],
                     probe_size: Mapping[str, int], same_size: dict[str, str]
                     ) -> dict[str, Any]:
    """The plan's outputs with each torch dim named as the spec's output of the same name
    names it, position by position (``(role, value, node)`` items; a value whose layout
    differs from the spec's only in which of two equal-size names it uses: the twins of a
    square weight, a copy). A goal compares torch's tensors position by position; the names
    are the lowering's. Names of different probe sizes are left (the goal then fails)."""
    from spec_lang.torch_frontend.lower import Opaque, rename_dims
    from spec_lang.torch_frontend.values import TV

    def size(name: str) -> int | None:
        seen = 0
        while name in same_size and seen < 16:
            name, seen = same_size[name], seen + 1
        return probe_size.get(name)

    out = dict(plan_out)
    for k, (role, pv, nd) in plan_out.items():
        sv = spec_out.get(k, (None, None))[1]
        if not (isinstance(sv, TV) and isinstance(pv, TV)) or len(sv.dims) != len(pv.dims):
            continue
        ren: dict[str, DimSpec] = {}
        for sd, pd in zip(sv.dims, pv.dims):
            if len(sd) != len(pd):
                break
            for a, b in zip(sd, pd):
                if a.name != b.name and size(a.name) == size(b.name) is not None:
                    ren[b.name] = DimSpec(a.name, b.shards)
        else:
            if not ren:
                continue
            dims = tuple(tuple(ren.get(d.name, d) for d in dim) for dim in pv.dims)
            try:     # (a dim the term is constant along has no name in it to rename)
                t = rename_dims(pv.term, {a: b for a, b in ren.items()
                                          if a in pv.term.dim_names}, same_size)
            except ValueError as e:   # never compared by names that disagree with positions
                out[k] = (role, Opaque("output", k, f"its dims cannot be named as the "
                                                    f"single-device step's ({e})"), nd)
                continue
            out[k] = (role, TV(t, dims), nd)
    return out


def plan_namer(a: Analysis, names: Names, chunked: set[str] | None = None) -> Any:
    """``atom -> DimSpec`` for a plan trace: by lineage, else by the block of a named atom it is.

    ``chunked`` (a pipelined plan, :mod:`pp_fold`): a block ``i`` of ``n`` of a named atom that
    the spec does not cut (a schedule's micro-batch) is the atom's name with the pseudo-shard
    ``#i/n`` (the spec of ``CHUNK``'s result, so the block needs no rename); its name is added
    to ``chunked``.

    Raises:
        KeyError: (from the returned function) an atom with no lineage at all.
    """
    d = a.dims
    cache: dict[int, DimSpec] = {}
    pieces: dict[int, list[Atom]] = {}
    for x in d.atoms:
        if x.piece is not None:
            pieces.setdefault(id(d.find(x)), []).append(x)

    def info_of(r: Atom, depth: int = 0) -> tuple[str, tuple[str, ...]] | None:
        if r.info is not None:
            return r.info
        if depth > 4:
            return None
        if r.copy_of is not None:
            ci = info_of(d.find(r.copy_of), depth + 1)
            if ci is not None:
                return (ci[0] + "'", ci[1])
        for x in pieces.get(id(r), ()):
            if True:
                parent, i, n = x.piece
                pi = info_of(d.find(parent), depth + 1)
                if pi is not None:
                    return (f"{pi[0]}@{i}of{n}", pi[1])
        return None

    def name(atom: Atom) -> DimSpec:
        r = d.find(atom)
        got = cache.get(id(r))
        if got is not None:
            return got
        info = info_of(r)
        if chunked is not None and (info is None or info[0] not in names.name_of_key):
            for x in pieces.get(id(r), ()):
                parent, i, n = x.piece
                ps = name(parent)
                ds = DimSpec(ps.name, ps.shards + (f"#{i}/{n}",))
                chunked.add(ps.name)
                cache[id(r)] = ds
                return ds
        if info is None or info[0] not in names.name_of_key:
            raise KeyError(f"a dim of size {r.size} created at {r.origin} has no counterpart "
                           "in the spec")
        ds = DimSpec(names.name_of_key[info[0]], info[1])
        cache[id(r)] = ds
        return ds

    return name


def spec_namer(a: Analysis, names: Names) -> Any:
    d = a.dims

    def name(atom: Atom) -> DimSpec:
        return DimSpec(names.name_of_key[names.key_of[id(d.find(atom))]])

    return name


def _shapes(gm: Any) -> Iterable[tuple[fx.Node, int | None, tuple[int, ...]]]:
    for n in gm.graph.nodes:
        v = n.meta.get("val")
        if isinstance(v, torch.Tensor):
            yield n, None, tuple(int(s) for s in v.shape)
        elif isinstance(v, (list, tuple)):
            for i, x in enumerate(v):
                if isinstance(x, torch.Tensor):
                    yield n, i, tuple(int(s) for s in x.shape)


def _local_size(ds: DimSpec, sizes: Mapping[str, int], axis_sizes: Mapping[str, int]
                ) -> int | None:
    """The real size of ``ds`` on one rank (its global size over its shards); None when its
    size is not known, -1 when the shards do not divide it."""
    g = sizes.get(ds.name)
    if g is None:
        return None
    k = 1
    for s in ds.shards:
        k *= int(s.split("/")[1]) if s.startswith("#") else axis_sizes[s]
    return g // k if g % k == 0 else -1


def real_shape_of(an: Analysis, namer: Any, sizes: Mapping[str, int],
                  axis_sizes: Mapping[str, int]) -> Any:
    """``shape(node, i)``: the shape of output ``i`` (None: the only one) of a node of ``an``'s
    probe trace at the real sizes, from its named dims (None when a dim has no name or size);
    what ``real_moves.check_real_moves`` composes the probe trace's moves with."""
    def shape(n: fx.Node, i: int | None) -> tuple[int, ...] | None:
        lay = an.layouts.get(n)
        if lay is None or n in an.unsupported:
            return None
        if i is not None:
            lay = lay[i] if isinstance(lay, (list, tuple)) and i < len(lay) else None
            if lay is None:
                return None
        out = []
        try:
            for dim in lay:
                k = 1
                for x in an.dims.canon(dim):
                    v = _local_size(namer(x), sizes, axis_sizes)
                    if v is None or v < 0:
                        return None
                    k *= v
                out.append(k)
        except Exception:  # noqa: BLE001 -- an atom without a name: unknown
            return None
        return tuple(out)
    return shape


def solve_real_sizes(pairs: list[tuple[Analysis, Any, Any, dict[str, int]]],
                     extra: Mapping[str, int] | None = None) -> dict[str, int]:
    """Real global sizes of every IR dim name.

    ``pairs``: (analysis of a probe trace, its namer, the real trace's graph module, the mesh
    axis sizes) for the spec and each plan trace. The two graphs must have the same nodes.

    Raises:
        SizeMismatch: the real shapes are not products of consistent named sizes.
    """
    eqs: list[tuple[list[DimSpec], int, str]] = []
    for an, namer, real_gm, _axes in pairs:
        probe_nodes = semantic_nodes(an.gm)
        real_nodes = semantic_nodes(real_gm)
        if len(probe_nodes) != len(real_nodes):
            raise SizeMismatch(f"the graph at real sizes has {len(real_nodes)} nodes, at probe "
                               f"sizes {len(probe_nodes)}: the program depends on the sizes")
        try:    # the data movement too (R24-1: a reshape's factors swapped at real sizes)
            rmap = align_sizes(list(an.gm.graph.nodes), list(real_gm.graph.nodes))[0]
        except ValueError as e:
            raise SizeMismatch(f"{e}: the program depends on the sizes") from None
        for n, i, _shape in _shapes(an.gm):
            if n not in rmap:
                continue
            lay = an.layouts.get(n)
            if lay is None or n in an.unsupported:
                continue
            if i is not None:
                lay = lay[i] if isinstance(lay, (list, tuple)) and i < len(lay) else None
                if lay is None:
                    continue
            rv = rmap[n].meta.get("val")
            rv = rv[i] if i is not None else rv
            rshape = tuple(int(s) for s in rv.shape)
            if len(rshape) != len(lay):
                raise SizeMismatch(f"{an.where(n)}: rank {len(rshape)} at real sizes, "
                                   f"{len(lay)} at probe sizes")
            for dim, rs in zip(lay, rshape):
                specs = [namer(x) for x in an.dims.canon(dim)]
                eqs.append((specs, rs, an.where(n)))
    sizes: dict[str, int] = dict(extra or {})
    axis_sizes: dict[str, int] = {}
    for _, _, _, ax in pairs:
        axis_sizes.update(ax)

    def local(ds: DimSpec) -> int | None:
        return _local_size(ds, sizes, axis_sizes)

    changed = True
    while changed:
        changed = False
        for specs, rs, where in eqs:
            unknown = [s for s in specs if s.name not in sizes]
            if len(unknown) != 1:
                continue
            u = unknown[0]
            known = 1
            for s in specs:
                if s is not u:
                    known *= local(s) or 1
            if known == 0 or rs % known:
                raise SizeMismatch(f"{where}: real size {rs} is not a multiple of {known}")
            loc = rs // known
            k = 1
            for sh in u.shards:
                k *= int(sh.split("/")[1]) if sh.startswith("#") else axis_sizes[sh]
            sizes[u.name] = loc * k
            changed = True
    for specs, rs, where in eqs:
        prod = 1
        for s in specs:
            ls = local(s)
            if ls is None:
                raise SizeMismatch(f"{where}: dim {s} has no consistent real size")
            if ls < 0:
                raise SizeMismatch(f"{where}: at the real sizes {s} is not a whole number of "
                                   f"entries ({s.name} = {sizes[s.name]} split over "
                                   f"{'x'.join(s.shards)}): the shards fall inside another "
                                   "named dim than at the probe sizes; choose sizes whose "
                                   "shards divide the outermost named dim of each sharded dim")
            prod *= ls
        if prod != rs:
            raise SizeMismatch(f"{where}: the real shape has {rs} where the named dims "
                               f"{[str(s) for s in specs]} give {prod}: the program depends on "
                               "the sizes in a way the probe trace does not show")
    return sizes
