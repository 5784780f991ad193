"""Process groups known by the object the world made, not by their name (adversarial round 33b:
R33b-1, R33b-2).

The lowering maps a collective to a mesh axis through the group's *name*
(:attr:`World.groups`, ``ProcessGroupRef.group_name``, ``Traces.pg_axis``). A name is not a
group, and the train file can change what a name stands for:

* R33b-1: ``ProcessGroup._set_group_name`` renames a group object in place. The tp group, or a
  group of the rank alone (``dist.new_group([r])``), renamed to the dp group's name and given to
  ``dist.all_reduce`` was recorded as ``ProcessGroupRef("<dp's name>")`` and modelled as an
  all-reduce over dp, while the real all-reduce runs over the group object (its own ranks). A
  name read when the trace is written (after the step) is not safe either: a group renamed
  *after* its all-reduce would carry the other axis's name. So a ``c10d`` op's group constant
  is mapped to its axis by **identity**: the very object the world made for that axis
  (:func:`world_made`) is that axis whatever it is called now, and any other object is no axis
  (its own name is kept, which names no axis, so the collective stays UNKNOWN as a
  ``dist.new_group`` always was); an object that is not the world's but carries an axis's name
  is refused (:func:`constants_by_identity`).
* R33b-2: a functional collective (``funcol.all_reduce(t, "sum", mesh["dp"])``, and the
  collectives DTensor and torch's TP / FSDP issue) carries the group *name*, which the real
  op resolves in c10d's registry when it runs. ``_unregister_process_group`` /
  ``_register_process_group`` make a name resolve to another group, even only during the step
  and given back at its end (r33b_09: nothing left to see afterwards). So at every collective
  the tracer records (:func:`checking`), a group name of a mesh axis must resolve, *at that
  moment*, to the object the world made for that axis (:func:`collective_problem`). The
  resolver and ``ProcessGroup.unbox`` are bound when this module is imported, before the
  train file is (a train file that replaces ``torch._C._distributed_c10d._resolve_process_group``
  changes neither this check nor the C++ resolver the real op calls).

Writes to the registry that leave every axis name on its own group (r33b_10: a name
re-registered to the group it already named) are not refused: only what a collective would
run over is checked.

Two more ways the real collective leaves the axis while the object, its name and the registry
still say it (adversarial round 34b):

* R34b-1: a ``ProcessGroup`` object dispatches a collective to its *backend* for the tensor's
  device. ``pg._register_backend(cpu, BackendType.UCC, other._get_backend(cpu))`` (a backend
  type the object has not registered) stores another group's backend for the device: the
  world's dp object then all-reduces over tp's (or a singleton's) ranks. So the world records,
  per axis object, its backend for every device it has (:func:`world_made`), and
  :func:`backend_problem` requires the very same backend objects (compared by identity; no
  device added or dropped) at every collective the tracer records, after ``parallelize`` and
  after the step (a swap left for the next step). A backend re-registered as itself
  (r34b_05) changes nothing a collective runs on and is not refused.
* R34b-4: FSDP2 (and ``replicate``) resolves its process groups once, when ``fully_shard`` is
  called in ``parallelize`` (``FSDPMeshInfo``: ``mesh.get_group(...)`` through c10d's
  registry), and keeps the objects; the capture records the call and used to resolve the
  unit's groups after ``parallelize`` returned, when a name re-registered around the calls was
  given back. :func:`groups_at_call` resolves them at the call, as torch does, and requires
  each to be the world's object for its axis (the capture then models the unit over the
  groups so resolved); :func:`world_problem` (registry and backends) runs again when
  ``parallelize`` returns.

R34e-3 (round 34e): the checks above run where the capture records a collective, but real FSDP2
also all-gathers a resharded unit again in the backward, which the capture's stand-in does not
issue: a backend swapped after the forward and put back (the very same object) in a hook on the
output's gradient moved only that all-gather to tp's ranks, and no check saw it. So while a fake
world lives, ``ProcessGroup._register_backend`` (bound when this module is imported, before the
train file) is wrapped (:func:`_registering`): a call that leaves a world group on another backend
than the world made it with, even for a moment, is recorded and every later check
(:func:`backend_problem`) reports it. Re-registering a group's own backend (r34e_04) is not
refused. (A train file holding the original from import undoes this: R29-4 family.)

A group the train file makes with ``dist.new_group`` is not the world's object, but when its
ranks are exactly a mesh axis's ranks through the rank it is that axis (issue 11:
:mod:`spec_lang.torch_frontend.new_groups`, which records it when it is made, with its ranks and
its backends, and checks them at every use): :func:`name_of` gives it the world's name of the
axis, after the checks above (a new group carrying an axis's name is still refused).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping
from typing import Any

from torch._C._distributed_c10d import _resolve_process_group as _RESOLVE
from torch.distributed import ProcessGroup

from spec_lang.torch_frontend import new_groups

__all__ = ["world_made", "world_gone", "world_groups", "name_of", "collective_problem",
           "checking", "constants_by_identity", "backend_problem", "world_problem",
           "groups_at_call"]

_UNBOX = ProcessGroup.unbox
# bound at import, before the train file (which could replace it on the class: R34b-1)
_REGISTER_BACKEND = vars(ProcessGroup)["_register_backend"]
# a swap of a world group's backend seen when it was made (R34e-3): reported by backend_problem
_SWAPPED: list[str] = []
# the backends the world made each axis's group with: name -> {device type: backend object}
_BACKENDS: dict[str, dict[str, Any]] = {}
# the groups the world made: name -> (axis, group object); empty outside a fake world
_BY_NAME: dict[str, tuple[str, Any]] = {}
_NAMESPACES = ("c10d", "_c10d_functional", "_c10d_functional_autograd", "_dtensor")


def world_made(groups: Mapping[str, Any]) -> None:
    """Record the group object the world made per mesh axis (``axis -> ProcessGroup``), with
    the names they have now (before any code of the train file runs on them)."""
    from torch.distributed import get_process_group_ranks, get_rank

    _BY_NAME.clear()
    _BACKENDS.clear()
    for axis, pg in groups.items():
        _BY_NAME[str(pg.group_name)] = (axis, pg)
        _BACKENDS[str(pg.group_name)] = _backends(pg)   # held: the objects stay the same
    _SWAPPED.clear()
    # the ranks of each axis through this rank, for a dist.new_group of them (issue 11)
    new_groups.world_made({a: get_process_group_ranks(pg) for a, pg in groups.items()},
                          get_rank())


def world_gone() -> None:
    """Forget the world's groups (its process group is destroyed)."""
    _BY_NAME.clear()
    _BACKENDS.clear()
    _SWAPPED.clear()
    new_groups.world_gone()


def _registering(pg: Any, *a: Any, **k: Any) -> Any:
    """``ProcessGroup._register_backend`` while a fake world lives: the original, then a world
    group left on another backend is recorded (R34e-3: a swap put back before any recorded
    collective still ran an unrecorded one over another group)."""
    out = _REGISTER_BACKEND(pg, *a, **k)
    if _BY_NAME and not _SWAPPED:
        bad = _backend_changed()
        if bad:
            _SWAPPED.append(f"{bad} (seen when it was registered, even if put back later)")
    return out


# in place from this module's import on (before the train file's, and before pp_guard's
# snapshot of torch.distributed): outside a fake world it is the original (R34e-3)
ProcessGroup._register_backend = _registering   # noqa: SLF001


# the backend reader bound before the train file (R34b-1), shared with new_groups
_backends = new_groups.backends


def backend_problem() -> str | None:
    """Why a world group no longer runs on the backends the world made it with (R34b-1:
    ``ProcessGroup._register_backend`` of another group's backend), or None."""
    if _SWAPPED:                 # swapped, maybe put back since (R34e-3)
        return _SWAPPED[0]
    return _backend_changed()


def _backend_changed() -> str | None:
    """Why a world group runs on another backend now than the world made it with, or None."""
    for name, (axis, pg) in _BY_NAME.items():
        was = _BACKENDS.get(name, {})
        try:
            now = _backends(pg)
        except Exception as e:  # noqa: BLE001 -- unreadable: refused, never skipped
            return f"the {axis!r} axis's backends could not be read ({type(e).__name__}: {e})"
        for dev in sorted(set(was) | set(now)):
            if now.get(dev) is not was.get(dev):
                return (f"the {axis!r} axis's process group object runs its {dev} collectives "
                        "on another backend than the world made it with "
                        "(ProcessGroup._register_backend)")
    return None


def world_problem() -> str | None:
    """Why the world's groups are not as it made them: an axis name that resolves in c10d's
    registry to another object (R33b-2, R34b-4) or an axis object on another backend
    (R34b-1); None outside a fake world."""
    for name in _BY_NAME:
        bad = _resolves_to_world(name)
        if bad:
            return bad
    return backend_problem()


def groups_at_call(mesh: Any) -> tuple[dict[str, Any], str | None]:
    """``(axis -> group, problem)`` of a ``fully_shard`` / ``replicate`` call's mesh, resolved
    now, as FSDP2 does at the call (R34b-4): a mesh axis's group must be the object the world
    made for that axis, any other group must not carry an axis's name (R33b-1)."""
    out: dict[str, Any] = {}
    if mesh is None or not _BY_NAME:
        return out, None
    obj_of = {axis: obj for axis, obj in _BY_NAME.values()}
    for i, a in enumerate(mesh.mesh_dim_names or ()):
        g = out[a] = mesh.get_group(i)          # by index, as FSDPMeshInfo does
        if a in obj_of and g is not obj_of[a]:
            return out, (f"the mesh's {a!r} group resolves, when the call runs, to another "
                         "process group than the world made for the axis (c10d's registry or "
                         "the mesh rewritten while parallelize runs)")
        if a not in obj_of:
            _, bad = name_of(g)
            if bad:
                return out, bad
    bad = world_problem()
    return out, bad


def world_groups() -> dict[str, tuple[str, Any]]:
    """The world's groups: name -> (axis, object)."""
    return dict(_BY_NAME)


def name_of(pg: Any) -> tuple[str | None, str | None]:
    """``(name, problem)`` of a group object: the world's name of its axis if it is the object
    the world made for the axis (whatever it is called now: R33b-1), else its own name when that
    names no axis; a group that is not the world's but carries an axis's name is a problem.
    A ``dist.new_group`` made with exactly an axis's ranks through this rank is that axis
    (:func:`new_groups.axis_of`, issue 11): the world's name of the axis."""
    for name, (axis, obj) in _BY_NAME.items():
        if pg is obj:
            new_groups.mesh_used(axis)
            return name, None
    own = getattr(pg, "group_name", None)
    if own in _BY_NAME:
        return None, (f"a process group that is not the {_BY_NAME[own][0]!r} axis's carries "
                      f"its name {own!r} (renamed with ProcessGroup._set_group_name)")
    if _BY_NAME:
        axis, bad = new_groups.axis_of(pg)
        if bad:
            return None, bad
        if axis is not None:
            return next(n for n, (a, _) in _BY_NAME.items() if a == axis), None
    return own, None


def _group_object(v: Any) -> Any:
    if isinstance(v, ProcessGroup):
        return v
    try:
        return _UNBOX(v)
    except (RuntimeError, TypeError):
        return None


def _resolves_to_world(name: str) -> str | None:
    axis, obj = _BY_NAME[name]
    try:
        now = _RESOLVE(name)
    except (RuntimeError, ValueError) as e:  # the name unregistered
        return f"the {axis!r} axis's group name {name!r} resolves to no group ({e})"
    if now is not obj:
        return (f"the {axis!r} axis's group name {name!r} resolves to another process group "
                f"(c10d's registry rewritten: _unregister_process_group / "
                f"_register_process_group)")
    return None


def collective_problem(target: Any, args: tuple, kwargs: Mapping[str, Any] | None,
                       root: Any) -> str | None:
    """Why a collective recorded now (``target`` an op of the ``c10d``, ``_c10d_functional``,
    ``_dtensor`` namespaces; ``args`` / ``kwargs`` as the tracer records them, a torchbind
    group as a ``get_attr`` node of ``root``) does not run over the group the trace will say,
    or None. A group name of a mesh axis must resolve now to the world's object for the axis
    (R33b-2); a group object that is not the world's must not carry an axis's name (R33b-1)."""
    ns = getattr(target, "namespace", None)
    schema = getattr(target, "_schema", None)
    if ns not in _NAMESPACES or schema is None or not _BY_NAME:
        return None
    bad = backend_problem()      # any world group's backend replaced (R34b-1)
    if bad:
        return bad
    given = list(zip(schema.arguments, args)) + [
        (a, (kwargs or {})[a.name]) for a in schema.arguments if a.name in (kwargs or {})]
    for arg, v in given:
        if getattr(v, "op", None) == "get_attr":
            v = getattr(root, v.target, None)
        if isinstance(v, str):   # ``group_name`` (schema type ``Any`` or ``str``)
            if "group" in arg.name and v in _BY_NAME:
                new_groups.mesh_used(_BY_NAME[v][0])
                bad = _resolves_to_world(v)
                if bad:
                    return bad
        elif "ProcessGroup" in str(arg.type) or isinstance(v, ProcessGroup) or (
                hasattr(v, "_type") and "c10d.ProcessGroup" in v._type().qualified_name()):
            pg = _group_object(v)
            if pg is None:
                return f"a process group argument the capture cannot read ({type(v).__name__})"
            _, bad = name_of(pg)
            if bad:
                return bad
    return None


@contextlib.contextmanager
def checking(findings: list[tuple[Any, str]]) -> Iterator[None]:
    """Within the block (the traced step, inside ``make_fx``), every node the tracer records
    for a collective is checked (:func:`collective_problem`) as it is recorded; a problem is
    appended to ``findings`` with its node (refused after the trace: the train file could catch
    an exception raised here)."""
    from torch.fx.experimental.proxy_tensor import get_proxy_mode

    from spec_lang.torch_frontend.op_guard import create_node_hook

    mode = get_proxy_mode()
    tracer = getattr(mode, "tracer", None)
    graph = getattr(tracer, "graph", None)
    if graph is None or not _BY_NAME:
        yield
        return
    def create_node(create: Any, op: str, target: Any, args: Any = None, kwargs: Any = None,
                    *a: Any, **k: Any) -> Any:
        bad = None
        if op == "call_function":
            try:
                bad = collective_problem(target, tuple(args or ()), kwargs, tracer.root)
            except Exception as e:  # noqa: BLE001 -- unreadable: refused, never skipped
                bad = f"its process group could not be checked ({type(e).__name__}: {e})"
        node = create(op, target, args, kwargs, *a, **k)
        if bad:
            findings.append((node, f"{target}: {bad}"))
        return node

    with create_node_hook(graph, create_node):
        yield


def constants_by_identity(gm: Any) -> list[tuple[Any, str]]:
    """Replace every torchbind ``ProcessGroup`` constant of ``gm`` by a
    :class:`~spec_lang.torch_frontend.tracedata.ProcessGroupRef` named by identity
    (:func:`name_of`: the world's name of the axis whose object it is). Returns the
    ``(get_attr node, problem)`` of the groups that cannot be named so (R33b-1). Outside a
    fake world (the spec) nothing is changed."""
    from spec_lang.torch_frontend.tracedata import ProcessGroupRef

    out: list[tuple[Any, str]] = []
    if not _BY_NAME:
        return out
    for n in gm.graph.nodes:
        if n.op != "get_attr":
            continue
        v = getattr(gm, n.target, None)
        kind = v._type().qualified_name() if hasattr(v, "_type") else ""  # noqa: SLF001
        if not (isinstance(v, ProcessGroup) or kind.endswith("c10d.ProcessGroup")):
            continue
        name, bad = name_of(_group_object(v))
        if bad or name is None:
            user = next(iter(n.users), n)
            out.append((user, bad or "a process group without a name"))
            continue
        setattr(gm, n.target, ProcessGroupRef(name))
    return out


def checked(fn: Any, findings: list[tuple[Any, str]]) -> Any:
    """``fn`` (the function ``make_fx`` traces) run within :func:`checking`."""
    def run(*a: Any, **k: Any) -> Any:
        with checking(findings):
            return fn(*a, **k)
    return run


def refuse_foreign_groups(gm: Any, findings: list[tuple[Any, str]], path: str) -> None:
    """After the trace: refuse what :func:`checking` found, then name ``gm``'s group constants
    by identity (:func:`constants_by_identity`) and refuse a group that cannot be.

    Raises:
        PlanError: at the collective's line in the train file.
    """
    from spec_lang.errors import PlanError
    from spec_lang.torch_frontend.analysis import node_site

    found = findings + constants_by_identity(gm)
    after = world_problem()      # left changed for the next step (R34b-1, R33b-2)
    if after and not found:
        raise PlanError(f"{path}:1: when the step returned, the world's process groups are "
                        f"not as it made them: {after}. Leave the groups the mesh made, their "
                        "backends and c10d's group registry as they are")
    if found:
        node, why = found[0]
        raise PlanError(
            f"{node_site(node, path)}: a collective does not run over the group the capture "
            f"records: {why}. A process group is traced as the mesh axis whose group object it "
            "is; leave the groups the mesh made, their names and c10d's group registry as they "
            "are while the step runs (no ProcessGroup._set_group_name, no "
            "_unregister_process_group / _register_process_group of a mesh axis's name, no "
            "ProcessGroup._register_backend of another group's backend)")
