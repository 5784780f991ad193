"""Pricing of recovery-strategy actions with the cluster model (seconds).

The trainer never computes seconds (docs/harness-contract.md); its strategies return
actions and this module prices them by simulating them in simpy:

- ``Transfer(src_stage, dst_stage, nbytes)``: one message over the link src -> dst
  (replica 0), ``latency_s + bytes / bytes_per_s``, holding that link;
- ``StorageWrite(nbytes)`` / ``StorageRead(nbytes)``: ``storage_latency_s + bytes /
  storage_bytes_per_s``, holding the (single) storage resource;
- ``Restart(stage)``: ``restart_delay_s`` (a replacement node joins);
- ``Rollback(to_iteration)``: 0 s here; the redone iterations cost time again in
  `simulator.run`.

Bytes: when the cluster models a model (``Cluster.model``, e.g. paper-geo's 500M LLaMa) an
action's bytes are that model's bytes of the content the action names (``of_stages``,
``optimizer``), not the trained toy's ``nbytes`` (`simulator.model_size.action_bytes`, issue 15).

Blocking actions of one hook call run one after another in the order returned (a conservative
choice: recovery steps of one failure depend on each other — the node must join before the
copy reaches it), so their price is the sum of the formulas above. Background actions
(``Transfer.background``, CheckFree+'s replica refresh) run concurrently, each on its own link
(two on one directed link still queue); `simulator.run` overlaps them with the next iteration.
Actions are matched by class name so the simulator works with any object that carries the
contract's fields.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import simpy

from simulator.cluster import Cluster
from simulator.errors import SimulationError
from simulator.model_size import ModelSize, action_bytes

__all__ = ["ACTION_KINDS", "Price", "action_seconds", "price", "price_actions", "describe_action"]

ACTION_KINDS = ("Transfer", "StorageWrite", "StorageRead", "Restart", "Rollback")


def action_seconds(cluster: Cluster, action: Any, trained: ModelSize | None = None) -> float:
    """The formula price of one action in seconds (no contention); see `action_bytes` for bytes."""
    match type(action).__name__:
        case "Transfer":
            nbytes, _ = action_bytes(action, cluster.model, trained)
            return cluster.transfer_s(action.src_stage, action.dst_stage, nbytes)
        case "StorageWrite" | "StorageRead":
            nbytes, _ = action_bytes(action, cluster.model, trained)
            return cluster.storage_s(nbytes)
        case "Restart":
            cluster._check_stage(action.stage)
            return cluster.restart_delay_s
        case "Rollback":
            return 0.0
        case other:
            raise SimulationError(f"unknown strategy action {other!r}; known: {', '.join(ACTION_KINDS)}")


@dataclass(frozen=True)
class Price:
    """Seconds of a set of actions and how many had their bytes scaled (content not said)."""

    seconds: float
    scaled: int


def price(cluster: Cluster, actions: Sequence[Any], *, trained: ModelSize | None = None,
          concurrent: bool = False) -> Price:
    """Seconds to carry out ``actions``: a simpy run with links and storage as resources.

    ``concurrent=False``: one after another, in order (recovery steps); ``True``: all at once,
    each link and the storage one request at a time (background transfers).
    """
    if not actions:
        return Price(0.0, 0)
    env = simpy.Environment()
    storage = simpy.Resource(env, capacity=1)
    links: dict[tuple[int, int], simpy.Resource] = {}

    def one(a: Any):
        kind = type(a).__name__
        seconds = action_seconds(cluster, a, trained)
        if kind == "Transfer":
            link = links.setdefault((a.src_stage, a.dst_stage), simpy.Resource(env, capacity=1))
            with link.request() as req:
                yield req
                yield env.timeout(seconds)
        elif kind in ("StorageWrite", "StorageRead"):
            with storage.request() as req:
                yield req
                yield env.timeout(seconds)
        else:
            yield env.timeout(seconds)

    def in_order():
        for a in actions:
            yield from one(a)

    if concurrent:
        for a in actions:
            env.process(one(a))
    else:
        env.process(in_order())
    env.run()
    scaled = sum(1 for a in actions if type(a).__name__ in ("Transfer", "StorageWrite", "StorageRead")
                 and action_bytes(a, cluster.model, trained)[1])
    return Price(float(env.now), scaled)


def price_actions(cluster: Cluster, actions: Sequence[Any], trained: ModelSize | None = None) -> float:
    """Seconds to carry out ``actions`` in order (`price` with ``concurrent=False``)."""
    return price(cluster, actions, trained=trained).seconds


def describe_action(action: Any) -> dict:
    """A JSON-able dict of an action: its kind and fields."""
    fields = getattr(action, "__dataclass_fields__", None)
    data = {k: getattr(action, k) for k in fields} if fields else dict(vars(action))
    return {"action": type(action).__name__, **data}
