"""A group the train file makes with ``dist.new_group(ranks)`` is a mesh axis when its ranks are
the axis's ranks (issue 11).

Megatron-LM's ``parallel_state`` and many hand-written trainers build their data- and
tensor-parallel groups with ``torch.distributed.new_group`` (``new_subgroups``,
``new_subgroups_by_enumeration`` call it) instead of a ``DeviceMesh``. A collective is modelled
over a mesh axis, and :mod:`group_identity` knows an axis by the group *object* the world made
for it (R33b-1). This module adds one more way to be that axis, by what the group is:

* :func:`watch` replaces ``torch.distributed.new_group`` (and ``distributed_c10d.new_group``,
  which ``new_subgroups*`` call) before the train file is imported. The wrapper calls torch's
  own ``new_group`` (bound here) and, in a fake world, records every call (:class:`Made`): the
  ranks in torch's order (``sorted`` unless ``sort_ranks=False``; every rank for ``None``),
  the name torch gives it, ``use_local_synchronization``, and for a member the group object,
  its backend objects per device and whether torch made it as asked: its ranks
  (``get_process_group_ranks``, in group-rank order), ``size()`` and ``rank()`` are those
  ranks and this rank's index, and no function of ``distributed_c10d`` (nor the default
  group's ``new_group`` hook) was replaced since torch was imported. Anything else
  (a rank that is not an ``int``, a replaced helper) leaves the group unusable: no axis.
* :func:`axis_of` (from :func:`group_identity.name_of`): a recorded, usable group object is
  axis A when its ranks, *in order*, are exactly the ranks of A through this rank as the world
  made them (``get_process_group_ranks`` of A's group before the train file ran; ascending)
  and no other axis has those ranks. A subset, a union of axes, the whole world on a 2-D
  mesh, Megatron's embedding group, or the axis's ranks in another order (``sort_ranks=False``:
  all_gather / reduce_scatter / all_to_all chunks follow the group's rank order) is no axis:
  its collective stays UNKNOWN as before. The object is checked at every use as the world's
  are: its ranks still as made (``_world.pg_group_ranks`` untouched), the same backend objects
  (R34b-1), no axis's name on it (R33b-1, in ``name_of``); a change is refused.
* :func:`check_traces` (from ``frontend.capture_all``): the real collective runs over the
  group torch *pairs* across ranks by its name (the store prefix of its rendezvous), and torch
  requires every rank to call ``new_group`` for every group in the same order (its
  documentation; Megatron loops over all groups on every rank). Each traced rank checks only
  its own group against its own axis ranks; so when any trace maps a ``new_group`` to an axis,
  the calls recorded on every traced rank, at probe and real sizes, must be the same list of
  ``(ranks, name, use_local_synchronization)``: then each member of a group made the same
  group under the same name. The lowering checks that a collective runs over the same axis on
  every rank (``Traces.pg_axis``), not over the same group: a rank could take one of two groups
  of A's ranks (Megatron makes duplicates: a gloo copy of dp) or the mesh's group of A, and a
  member the other one; with ``async_op`` the real ranks would then pair collectives of other
  lines. So, over every trace, the groups taken for an axis must be one per set of ranks
  (one name for each ranks tuple taken) and an axis taken as a ``new_group`` anywhere must not
  be taken as the mesh's group anywhere (:func:`mesh_used`, recorded by ``group_identity``).
  Then every member's axis-A collectives run over one group that every member made the same:
  the collective the lowering models over A is the one the real ranks run. A rank that makes
  only its own group (the ranks of the others differ) is refused. A group made with
  ``use_local_synchronization=True`` is named by torch from its ranks (and the count of groups
  the rank is in), not by the shared count: such calls are left out of the comparison (a
  non-member may skip them, R35c-5), and its members pair by that name, which must be one name
  for the ranks over every trace, as above (members that name it differently would wait for
  each other in the real run, never pair another group). Every rank of the mesh is traced
  (``traced_ranks``: a mesh with untraced corners is UNKNOWN anyway), so the check covers
  every rank. A pipelined step is refused when it maps a ``new_group`` (its stage traces are
  composed; not supported yet).
* ``backend="gloo"`` (or a device map of gloo only, ``"cpu:gloo"``) while
  ``dist.Backend``'s registries are torch's: the group is made on the world's fake backend, as
  the mesh's groups are (Megatron's gloo duplicate of every dp group, R35c-3); any other
  ``backend=`` or ``pg_options=`` makes the group no axis (R35c-1). So does a group made while
  ``torch.distributed``'s modules or classes differ from ``pp_guard``'s snapshot, taken before
  the train file (R36c-1, R36d-2, R36d-3: ``ProcessGroupGloo.__init__`` replaced; the fake world
  never constructs it, the real run does).
* Refused even if caught: a ``new_group`` the real backend could fail to make where the fake
  one does not, and one that raises in the capture (:mod:`group_construction`: R36d-1).

Not covered: a functional collective given such a group (``funcol.all_reduce(t, "sum", pg)``)
carries the group's own name, which names no axis: UNKNOWN, as before. The c10d all-gather /
reduce-scatter have no lowering rule yet (UNKNOWN whatever the group); when they get one, the
group's rank order checked here is what fixes their chunk order.
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch.distributed as dist
from torch.distributed import ProcessGroup
from torch.distributed import distributed_c10d as c10d
import torch.testing._internal.distributed.fake_pg  # noqa: F401 -- registers "fake" first

from spec_lang.torch_frontend.fake_answers import prefix_log
from spec_lang.torch_frontend.group_construction import (made_checked, take_launch_env,
                                                         watch_device_mesh, why_it_may_raise)
from spec_lang.torch_frontend.pp_guard import current_snapshot, modified
from spec_lang.torch_frontend.value_reads import patched

__all__ = ["Made", "backends", "watch", "world_made", "world_gone", "axis_of", "mesh_used",
           "made_log", "check_traces"]

# torch's, bound at import (before the train file; it could replace them)
_ORIGINAL = c10d.new_group
_SIGNATURE = inspect.signature(_ORIGINAL)
_GET_RANKS = c10d.get_process_group_ranks
_SIZE = ProcessGroup.size
_RANK = ProcessGroup.rank
# bound at import, before the train file (which could replace them on the class: R34b-1)
_GET_BACKEND = ProcessGroup._get_backend  # noqa: SLF001
_DEVICE_TYPES = vars(ProcessGroup)["_device_types"]


def _reached(start: str) -> dict[str, Any]:
    """The functions and classes of ``distributed_c10d`` that ``start`` reaches by name
    (transitively through their code): what torch's ``new_group`` runs. The capture's own
    wrappers of other c10d functions (``all_reduce``, ``send``: ``pp_capture``) are not."""
    g, seen, todo = vars(c10d), {}, [start]
    while todo:
        k = todo.pop()
        if k in seen or not callable(g.get(k)):
            continue
        seen[k] = g[k]
        f = getattr(g[k], "__wrapped__", g[k])
        codes = [getattr(f, "__code__", None)]
        while codes:
            c = codes.pop()
            if c is not None:
                todo.extend(n for n in c.co_names if n in g)
                codes.extend(x for x in c.co_consts if type(x) is type(c))
    return seen


# distributed_c10d's functions as torch ships them that new_group runs through
_C10D = _reached("new_group")


def _backend_registry() -> tuple:
    """What ``new_group`` reads to make a group's backend: ``dist.Backend``'s registries (R35c-1:
    ``Backend.register_backend("borrow", creator)`` and ``new_group(ranks, backend="borrow")``
    gave the dp group the tp group's backend object)."""
    B = dist.Backend
    return tuple(tuple((k, id(v)) for k, v in dict(getattr(B, n, {})).items()) for n in (
        "_plugins", "default_device_backend_map", "backend_capability", "backend_type_map")) + (
        tuple(getattr(B, "backend_list", ())),
        # the class itself: Backend("gloo") is getattr(Backend, "GLOO") through its __new__,
        # and BackendConfig splits a device map (R36a-2: __new__ or GLOO replaced made "gloo"
        # torch's fake backend in the real run)
        tuple((k, id(v)) for k, v in vars(B).items()),
        tuple((k, id(v)) for k, v in vars(c10d.BackendConfig).items()))


# before the train file is imported (the fake backend registered first: imported above)
_REGISTRY = _backend_registry()


@dataclass
class Made:
    """One ``new_group`` call on this rank."""

    ranks: tuple[int, ...]
    name: str | None
    local: bool
    pg: Any = None                       # the group object (None: not a member)
    backends: dict[str, Any] = field(default_factory=dict)
    usable: bool = False                 # made as asked, by torch's own code
    axis: str | None = None              # the axis a collective took it for (axis_of)


_MADE: list[Made] = []
_WORLD: dict[str, Any] = {}     # "axes": axis -> ranks in group order, "rank": this rank
_ON: list[bool] = [False]
_MESH_USED: set[str] = set()    # the axes a collective took the mesh's group for


def world_made(axis_ranks: Mapping[str, Sequence[int]], rank: int) -> None:
    """The world's axes (their ranks through this rank, as the world made them) and rank."""
    _MADE.clear()
    _MESH_USED.clear()
    _WORLD.clear()
    _WORLD.update(axes={a: tuple(r) for a, r in axis_ranks.items()}, rank=rank)
    # the world's own objects, before the train file's code runs in it (R35c-2)
    w = c10d._world  # noqa: SLF001
    default = c10d._get_default_group()  # noqa: SLF001
    _WORLD.update(world=w, pg_map=w.pg_map, default=default, store=w.pg_map[default][1],
                  entry=w.pg_map[default])
    _ON[0] = True


def world_gone() -> None:
    """Stop recording (the log is kept for the trace being written: :func:`made_log`)."""
    _ON[0] = False


def backends(pg: Any) -> dict[str, Any]:
    """Device type -> the backend object ``pg`` runs that device's collectives on (also
    :mod:`group_identity`'s reader)."""
    out: dict[str, Any] = {}
    for dev in _DEVICE_TYPES.__get__(pg):
        try:
            out[str(dev)] = _GET_BACKEND(pg, dev)
        except RuntimeError:
            out[str(dev)] = None
    return out


def _tampered() -> bool:
    """A function of ``distributed_c10d`` replaced, or a ``new_group`` hook on the default
    group (torch delegates to it), ``dist.Backend``'s registries or the attributes of
    ``dist.Backend`` / ``BackendConfig`` changed (R35c-1, R36a-2), or the default group's
    entry or store in ``_world.pg_map`` not the world's (R35c-2: a store that moved one group's
    rendezvous keys under another's name paired other ranks in the real run; the entry holds
    the default backend a ``new_group`` without ``backend=`` takes): torch's ``new_group``
    would not make what it is asked."""
    now = vars(c10d)
    if any(now.get(k) is not v for k, v in _C10D.items() if k != "new_group"):
        return True
    if _backend_registry() != _REGISTRY:
        return True
    try:
        w = c10d._world  # noqa: SLF001
        if (w is not _WORLD.get("world") or w.pg_map is not _WORLD.get("pg_map")
                or c10d._get_default_group() is not _WORLD.get("default")  # noqa: SLF001
                or w.pg_map[_WORLD["default"]][1] is not _WORLD.get("store")
                or w.pg_map[_WORLD["default"]] is not _WORLD.get("entry")):
            return True
    except Exception:  # noqa: BLE001
        return True
    try:
        if hasattr(c10d._get_default_group(), "new_group"):  # noqa: SLF001
            return True
    except Exception:  # noqa: BLE001
        return True
    # torch.distributed's modules and classes as torch ships them (pp_guard's snapshot, taken
    # before the train file): ProcessGroupGloo.__init__ replaced builds the real run's group over
    # another rendezvous, or over this rank alone; the fake world never constructs it (R36c-1,
    # R36d-2, R36d-3)
    from spec_lang.torch_frontend.pp_capture import capture_patches

    return bool(modified(current_snapshot(), patched() | capture_patches()))


# torch's gloo, which every build has and which raises nothing the fake backend does not (the
# others can: "mpi" with use_local_synchronization, "nccl" without CUDA; a train file catching
# that error would take another branch in the real run only: R36a-4)
_BUILTIN = frozenset({"gloo"})


def _builtin_backend(asked: Any) -> bool:
    """``asked`` (a ``new_group`` ``backend=``) names only torch's gloo (R35c-3): a
    ``str`` itself (``dist.Backend.GLOO`` is one; a subclass's methods are the train file's:
    R36a-1) such as ``"gloo"``, ``"GLOO"`` or ``"cpu:gloo"``, read by torch as these
    while ``dist.Backend``, ``BackendConfig`` and their registries are torch's (checked by the
    caller: ``_tampered``, R36a-2)."""
    if type(asked) is not str:
        return False
    parts = asked.lower().split(",")
    if len(parts) == 1 and ":" not in parts[0]:
        return parts[0] in _BUILTIN
    # "cpu:gloo,cuda:gloo": one backend per device type; a device named twice
    # ("cpu:gloo,cpu:gloo") makes torch's BackendConfig raise in the real run (R38a-5), so
    # that string is left to torch, which raises in the capture as well
    pairs = [p.partition(":") for p in parts]
    devices = [d for d, _, _ in pairs]
    # and a cpu backend: "cuda:gloo" alone gives the group none, and a collective on a cpu
    # tensor over it raises in the real run (R38c-4)
    return all(sep and d in ("cpu", "cuda") and b in _BUILTIN for d, sep, b in pairs) \
        and len(set(devices)) == len(devices) and "cpu" in devices


def _new_group(*args: Any, **kwargs: Any) -> Any:
    """``torch.distributed.new_group``, recorded in a fake world (module docstring)."""
    if not _ON[0]:
        return _ORIGINAL(*args, **kwargs)
    b = _SIGNATURE.bind(*args, **kwargs)
    b.apply_defaults()
    ranks = b.arguments["ranks"]
    if ranks is not None:
        ranks = b.arguments["ranks"] = list(ranks)    # an iterator is read once
    ints = ranks is None or all(type(r) is int for r in ranks)
    local = b.arguments["use_local_synchronization"] is True
    count = c10d._world.group_count  # noqa: SLF001
    # the world's backend, made by torch's creator: a backend or options of the train file's
    # choosing is no axis (R35c-1); one of torch's own backends named (Megatron's gloo
    # duplicate of every dp group, R35c-3) is made on the world's fake backend, as the mesh's
    # groups are: torch's real backend cannot be made on the fake store, and its collectives
    # compute what the fake one's are modelled as
    asked, tampered = b.arguments.get("backend"), _tampered()
    if asked is not None and _builtin_backend(asked) and not tampered:
        b.arguments["backend"] = asked = None
    # the real backend could raise making it, the fake one does not (R36d-1): refused
    why = why_it_may_raise(b.arguments.get("timeout"))
    clean = (not tampered and why is None and asked is None
             and b.arguments.get("pg_options") is None)
    first = len(prefix_log())
    pg = made_checked(_ORIGINAL, "dist.new_group", why, b.args, b.kwargs)
    clean = clean and not _tampered()
    if not ints:
        _MADE.append(Made((), None, local))
        return pg
    if ranks is None:
        want = tuple(range(dist.get_world_size()))
    else:
        want = tuple(sorted(ranks) if b.arguments["sort_ranks"] is not False else ranks)
    rec = Made(want, None if local else str(count), local)
    _MADE.append(rec)
    if isinstance(pg, ProcessGroup):
        rec.pg, rec.backends = pg, backends(pg)
        if local:
            rec.name = str(pg.group_name)
        me = _WORLD.get("rank")
        rec.usable = (clean and str(pg.group_name) == rec.name and me in want
                      and tuple(_GET_RANKS(pg)) == want and _SIZE(pg) == len(want)
                      and _RANK(pg) == want.index(me)
                      and _met_as_named(pg, prefix_log()[first:], rec.backends))
    return pg


def _met_as_named(pg: Any, made: Sequence[tuple[Any, str, Any]],
                  devices: Mapping[str, Any]) -> bool:
    """Whether the group's rendezvous is the one torch pairs by its name (R35d-4: ranks 2 and 3
    replaced ``PrefixStore.__init__`` while the dp groups were made, so that the group named
    ``n0`` met under ``n1/`` and rank 0 met rank 3 in the real run; ``_tampered`` saw nothing).
    The result is checked, not the means: the store ``_world.pg_map`` holds for ``pg`` must be
    a ``PrefixStore`` made in this call with the prefix ``"<group name>/"`` over the world's
    store, and every other ``PrefixStore`` made in the call (:func:`fake_answers.prefix_log`,
    which records the arguments torch's constructor was given) one of its devices' prefixes
    (``"cpu/"``) over that store. A constructor replaced by the train file that does not call
    torch's (through the recording one) leaves no record of the group's store: not usable."""
    try:
        store = c10d._world.pg_map[pg][1]  # noqa: SLF001
    except Exception:  # noqa: BLE001
        return False
    name = f"{pg.group_name}/"
    own = [m for m in made if m[0] is store]
    if len(own) != 1 or own[0][1] != name or own[0][2] is not _WORLD.get("store"):
        return False
    return all(m[0] is store or (m[2] is store and m[1] in {f"{d}/" for d in devices})
               for m in made)


def watch() -> None:
    """Replace ``new_group`` in ``torch.distributed`` and ``distributed_c10d`` (idempotent;
    a pass-through outside a fake world). Call before the train file is imported."""
    dist.new_group = _new_group
    c10d.new_group = _new_group
    take_launch_env()           # the backends' environment before the train file (R37a-7)
    watch_device_mesh(lambda: _ON[0])      # a DeviceMesh of the train file's (R37a-9)


def axis_of(pg: Any) -> tuple[str | None, str | None]:
    """``(axis, problem)`` of a group object that is not the world's: the axis whose ranks it
    was made with (module docstring), None if it is no axis; a problem when it was made so but
    has changed since (its ranks or backends)."""
    rec = next((m for m in _MADE if m.pg is pg), None)
    if rec is None or not rec.usable:
        return None, None
    try:
        same = (tuple(_GET_RANKS(pg)) == rec.ranks and _SIZE(pg) == len(rec.ranks)
                and backends(pg).keys() == rec.backends.keys()
                and all(v is rec.backends[k] for k, v in backends(pg).items()))
    except Exception as e:  # noqa: BLE001 -- unreadable: refused, never skipped
        return None, f"a dist.new_group group could not be read ({type(e).__name__}: {e})"
    if not same:
        return None, (f"the dist.new_group group of ranks {list(rec.ranks)} no longer has the "
                      "ranks or backends torch made it with")
    axes = [a for a, r in _WORLD.get("axes", {}).items() if r == rec.ranks]
    if len(axes) != 1:
        return None, None
    rec.axis = axes[0]
    return axes[0], None


def mesh_used(axis: str) -> None:
    """A collective (or ``fully_shard``) took the mesh's own group of ``axis``."""
    _MESH_USED.add(axis)


def made_log() -> dict[str, list]:
    """This rank's ``new_group`` calls (``"made"``: ``(ranks, name, local, axis taken for)``)
    and the axes taken as the mesh's group (``"mesh"``)."""
    return {"made": [(m.ranks, m.name, m.local, m.axis) for m in _MADE],
            "mesh": sorted(_MESH_USED)}


def check_traces(path: str, traces: Sequence[Any], *, pipelined: bool = False) -> None:
    """When some trace took a ``new_group`` for a mesh axis, every trace (every traced rank at
    probe and real sizes) must have made the same groups in the same order (module docstring).

    Raises:
        PlanError: the calls differ (or the step is pipelined).
    """
    from spec_lang.errors import PlanError

    got = [getattr(t, "new_groups", None) or {} for t in traces]
    logs = [[tuple(e) for e in g.get("made", [])] for g in got]
    taken = {(e[0], e[1], e[3]) for log in logs for e in log if e[3]}
    if not taken:
        return
    if pipelined:
        raise PlanError(f"{path}:1: a pipelined step whose collectives run over a "
                        "dist.new_group group is not supported: use the mesh's groups")
    # a group made with use_local_synchronization=True is named by torch from its ranks
    # (``_hash_ranks_to_str``): its members pair by that name whatever else each rank made,
    # and a non-member need not call new_group (R35c-5). The others are named by a count
    # every rank advances: those calls must be the same, in the same order, on every rank.
    first = [e[:3] for e in logs[0] if not e[2]]
    for t, log in zip(traces, logs):
        mine = [e[:3] for e in log if not e[2]]
        if mine != first:
            raise PlanError(
                f"{path}:1: the rank at {dict(getattr(t, 'coords', {}))} makes other "
                f"dist.new_group groups ({[(list(e[0]), e[1]) for e in mine]}) than the rank "
                f"at {dict(getattr(traces[0], 'coords', {}))} "
                f"({[(list(e[0]), e[1]) for e in first]}, as (ranks, name)): torch pairs a "
                "group across ranks by the order it is made in, so every rank must call "
                "new_group for every group, in the same order (as Megatron does)")
    names: dict[tuple, set] = {}
    for ranks, name, _ in taken:
        names.setdefault(ranks, set()).add(name)
    for ranks, ns in names.items():
        if len(ns) > 1:
            raise PlanError(f"{path}:1: collectives run over {len(ns)} different dist.new_group "
                            f"groups of the ranks {list(ranks)}: each rank may pair another "
                            "one; use one group per set of ranks")
    both = {a for _, _, a in taken} & {a for g in got for a in g.get("mesh", [])}
    if both:
        raise PlanError(f"{path}:1: collectives run over both the mesh's {sorted(both)[0]!r} "
                        "group and a dist.new_group group of its ranks: each rank may pair "
                        "another one; use one of them")
