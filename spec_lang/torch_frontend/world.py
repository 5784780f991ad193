"""A one-process fake process group of the declared mesh (``FRONTEND.md``, "A mesh of any world
size without processes").

``torch.testing._internal.distributed.fake_pg`` registers the ``"fake"`` backend: every
collective returns at once (its result is garbage, which is fine: only the graph is kept).
``rank=`` picks whose program is traced; ``mesh.get_group(axis).group_name`` maps each
process-group name the functional collectives carry back to its mesh axis.
"""

from __future__ import annotations

import contextlib
import math
import os
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import torch.distributed as dist
from torch.distributed.device_mesh import init_device_mesh
from torch.testing._internal.distributed.fake_pg import FakeStore

from spec_lang.torch_frontend.fake_answers import clear_prefixes
from spec_lang.torch_frontend.group_identity import world_gone, world_made
from spec_lang.torch_frontend.new_groups import watch

__all__ = ["World", "fake_world", "rank_of", "launcher_environment", "LAUNCHER_KEYS",
           "WorldStore"]

_STORE_METHODS = ("add", "append", "barrier", "check", "compare_set", "delete_key", "get",
                  "list_keys", "multi_get", "multi_set", "num_keys", "queue_len", "queue_pop",
                  "queue_push", "set", "set_timeout", "wait")


class WorldStore(FakeStore):
    """The fake world's key-value store: it holds nothing, as torch's ``FakeStore``, and a call
    made while the capture runs the train file's code is recorded and refused when the capture
    ends, even if the train file caught the error (R35a-2: ranks counted through
    ``c10d._get_default_store()``, the error caught and 1 used, were 2 in the real run)."""


def _store_method(name: str) -> Any:
    def call(self: Any, *a: Any, **k: Any) -> Any:  # noqa: ARG001
        from spec_lang.torch_frontend import thread_guard

        g = thread_guard.ACTIVE[0]
        if g is not None:
            g.note(thread_guard.user_line(g.path), f"the train file used the process group's "
                   f"key-value store ({name}): what other ranks put there is not traced (R35a-2)",
                   thread=False)
        raise RuntimeError(f"the fake process group's store holds nothing ({name})")
    call.__name__ = name
    return call


for _name in _STORE_METHODS:
    setattr(WorldStore, _name, _store_method(_name))
# the Python object must outlive the process group (C++ holds only its base part)
_HELD: list[WorldStore] = []


@dataclass(frozen=True)
class World:
    """The mesh of one traced rank: the ``DeviceMesh``, the rank's coordinates and the group
    names of its axes (the world's own: :mod:`group_identity` maps a collective's group to its axis
    by the object the world made, R33b-1 / R33b-2)."""

    mesh: Any
    coords: dict[str, int]
    groups: dict[str, str]


def rank_of(mesh: Mapping[str, int], coords: Mapping[str, int]) -> int:
    """The global rank of the coordinates (row-major over the axes in mesh order)."""
    r = 0
    for a, n in mesh.items():
        r = r * n + coords.get(a, 0)
    return r


# what torchrun sets for a rank (one node); removed for the single-device run
LAUNCHER_KEYS = ("RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "GROUP_RANK",
                 "NODE_RANK", "ROLE_RANK", "ROLE_WORLD_SIZE", "GROUP_WORLD_SIZE", "ROLE_NAME",
                 "MASTER_ADDR", "MASTER_PORT")


def launcher_environment(mesh: Mapping[str, int], coords: Mapping[str, int] | None) -> None:
    """Set ``os.environ`` as torchrun sets it for the rank at ``coords`` on one node (``RANK``,
    ``LOCAL_RANK``, ``WORLD_SIZE``, ``LOCAL_WORLD_SIZE``, ``ROLE_RANK``, ``ROLE_WORLD_SIZE``,
    ``GROUP_RANK``, ``GROUP_WORLD_SIZE``, torchrun's default ``MASTER_ADDR`` / ``MASTER_PORT``:
    a store client of the train file's own is then made, and refused by :mod:`fake_answers`,
    instead of failing on a missing variable, R35d-6), or, for ``coords=None`` (the
    single-device step), as ``python train.py`` runs: none of them. Nothing is inherited from a
    launcher (``TORCHELASTIC_*``, ``ROLE_*``, ``GROUP_*``: finding R6-6).

    The tracing child calls it *before* it imports the train file, so that code reading the
    rank when the file is imported sees the traced rank's (adversarial finding R7-4), and
    :func:`fake_world` again (R4-8).
    """
    for k in [k for k in os.environ
              if k.startswith(("TORCHELASTIC_", "ROLE_", "GROUP_")) or k in LAUNCHER_KEYS]:
        del os.environ[k]
    if coords is None:
        return
    world, rank = str(math.prod(mesh.values())), str(rank_of(mesh, coords))
    os.environ.update({"RANK": rank, "LOCAL_RANK": rank, "WORLD_SIZE": world,
                       "LOCAL_WORLD_SIZE": world, "GROUP_RANK": "0", "NODE_RANK": "0",
                       "ROLE_RANK": rank, "ROLE_WORLD_SIZE": world, "GROUP_WORLD_SIZE": "1",
                       "ROLE_NAME": "default", "MASTER_ADDR": "127.0.0.1",
                       "MASTER_PORT": "29500"})


@contextlib.contextmanager
def fake_world(mesh: Mapping[str, int], coords: Mapping[str, int]) -> Iterator[World]:
    """Initialise the fake process group as the rank at ``coords`` and build the mesh, with
    the rank's environment (:func:`launcher_environment`). The process group is destroyed on
    exit (a fresh one per traced rank).
    """
    if dist.is_initialized():
        dist.destroy_process_group()
    world = math.prod(mesh.values())
    launcher_environment(mesh, coords)
    watch()         # a dist.new_group of an axis's ranks is that axis (issue 11)
    clear_prefixes()    # the rendezvous stores of this world's groups (R35d-4)
    _HELD[:] = [WorldStore()]
    dist.init_process_group("fake", store=_HELD[0], rank=rank_of(mesh, coords),
                            world_size=world)
    try:
        dm = init_device_mesh("cpu", tuple(mesh.values()), mesh_dim_names=tuple(mesh))
        made = {a: dm.get_group(a) for a in mesh}
        groups = {pg.group_name: a for a, pg in made.items()}
        # the objects themselves: a group is its object, not its name (R33b-1, R33b-2)
        world_made(made)
        yield World(dm, {a: coords.get(a, 0) for a in mesh}, groups)
    finally:
        world_gone()
        dist.destroy_process_group()
