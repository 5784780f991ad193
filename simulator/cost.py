"""Pricing of recovery-strategy actions with the cluster model (seconds).

The trainer never computes seconds (docs/harness-contract.md); its strategies return
actions and this module prices them by simulating them in simpy:

- ``Transfer(src_stage, dst_stage, nbytes)``: one message over the link src -> dst
  (replica 0), ``latency_s + nbytes / bytes_per_s``, holding that link;
- ``StorageWrite(nbytes)`` / ``StorageRead(nbytes)``: ``storage_latency_s + nbytes /
  storage_bytes_per_s``, holding the (single) storage resource;
- ``Restart(stage)``: ``restart_delay_s`` (a replacement node joins);
- ``Rollback(to_iteration)``: 0 s here; the redone iterations cost time again in
  `simulator.run`.

Actions of one hook call run one after another in the order returned (a conservative
choice: recovery steps of one failure depend on each other — the node must join before the
copy reaches it), so the price is the sum of the formulas above. Actions are matched by
class name so the simulator works with any object that carries the contract's fields.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import simpy

from simulator.cluster import Cluster
from simulator.errors import SimulationError

__all__ = ["ACTION_KINDS", "action_seconds", "price_actions", "describe_action"]

ACTION_KINDS = ("Transfer", "StorageWrite", "StorageRead", "Restart", "Rollback")


def action_seconds(cluster: Cluster, action: Any) -> float:
    """The formula price of one action in seconds (no contention)."""
    match type(action).__name__:
        case "Transfer":
            return cluster.transfer_s(action.src_stage, action.dst_stage, int(action.nbytes))
        case "StorageWrite" | "StorageRead":
            return cluster.storage_s(int(action.nbytes))
        case "Restart":
            cluster._check_stage(action.stage)
            return cluster.restart_delay_s
        case "Rollback":
            return 0.0
        case other:
            raise SimulationError(f"unknown strategy action {other!r}; known: {', '.join(ACTION_KINDS)}")


def price_actions(cluster: Cluster, actions: Sequence[Any]) -> float:
    """Seconds to carry out ``actions`` in order: a simpy run with links and storage as resources."""
    if not actions:
        return 0.0
    env = simpy.Environment()
    storage = simpy.Resource(env, capacity=1)
    links: dict[tuple[int, int], simpy.Resource] = {}

    def worker():
        for a in actions:
            kind = type(a).__name__
            seconds = action_seconds(cluster, a)
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

    env.process(worker())
    env.run()
    return float(env.now)


def describe_action(action: Any) -> dict:
    """A JSON-able dict of an action: its kind and fields."""
    fields = getattr(action, "__dataclass_fields__", None)
    data = {k: getattr(action, k) for k in fields} if fields else dict(vars(action))
    return {"action": type(action).__name__, **data}
