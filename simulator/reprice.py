"""The same simulated run priced on another cluster, without training it again.

A run's losses, failures and strategy actions do not depend on the cluster when the failure model
is per iteration (`bernoulli`, with or without `mid_iteration`) and the strategy's decisions do not
read seconds: only the clock does. `reprice` walks a run record's rows and adds, per step, the
failure actions (priced as one call of `simulator.cost.price_actions`, as `run_one` does), the
lost partial work (`at_fraction x` the new iteration time), the new iteration time of the
strategy's schedule (`simulate_iteration` with its forward multiplier and swaps) and the
iteration-end actions. On the record's own cluster this reproduces `sim_time_s` of every row
(tested), so a table can show one sweep on several clusters. Not valid for `hourly` / trace failure
models (their draws depend on the clock) or for strategies whose decisions read seconds from their
knobs (`adaptive`, `checkpoint` / `neighbour_copy` / `gemini` with an `"auto"` interval): run those again.
"""

from __future__ import annotations

import math
from typing import Any

from simulator.cluster import Cluster
from simulator.cost import ACTION_KINDS, price_actions
from simulator.errors import SimulationError
from simulator.schedule import simulate_iteration

__all__ = ["reprice", "SECONDS_READING_STRATEGIES"]

SECONDS_READING_STRATEGIES = ("adaptive",)


def _actions(events: list[dict[str, Any]], phase: str) -> list[Any]:
    from trainer.strategies.base import Restart, Rollback, StorageRead, StorageWrite, Transfer

    table = {"Transfer": Transfer, "StorageWrite": StorageWrite, "StorageRead": StorageRead, "Restart": Restart,
             "Rollback": Rollback}
    out = []
    for e in events:
        if e.get("phase") != phase or e["action"] not in ACTION_KINDS:
            continue
        fields = {k: v for k, v in e.items() if k not in ("action", "phase", "cost_s")}
        out.append(table[e["action"]](**fields))
    return out


def reprice(record: dict[str, Any], cluster: Cluster, *, forward_multiplier: float = 1.0, swap_odd: bool = False,
            micro_batches: int = 4, schedule: str = "gpipe", knobs_from_this_cluster: bool = False) -> dict[str, Any]:
    """{"rows": [(iteration, sim_time_s, val_loss)...], "time_to_target_s", "iteration_s"} on `cluster`.

    `record`: a simulated run (`run_one`) or a real one (`simulator.real.run_real`, whose event
    sequence is the simulated run's, tested in tests/distributed). `forward_multiplier` /
    `swap_odd`: the strategy's (`RecoveryStrategy.forward_multiplier`, every stage alike, and
    `swap_on_odd_microbatches`). `knobs_from_this_cluster`: the seconds a strategy read from its
    knobs came from `cluster`, so its decisions stand.
    """
    spec = record.get("spec", {})
    if spec.get("failure_model", "bernoulli") != "bernoulli":
        raise SimulationError(f"cannot reprice a {spec.get('failure_model')!r} run: its failures depend on the clock")
    if record["key"]["strategy"] in SECONDS_READING_STRATEGIES and not knobs_from_this_cluster:
        raise SimulationError(f"cannot reprice {record['key']['strategy']!r}: its decisions read seconds")
    it_s = simulate_iteration(cluster, micro_batches, schedule=schedule,
                              forward_multiplier=lambda s: forward_multiplier, swap_odd=swap_odd).iteration_s
    now, out, ttt = 0.0, [], math.inf
    target = record.get("target_loss")
    for row in record["rows"]:
        if row["step"] > 0:
            events = row["strategy_events"] if "strategy_events" in row else row["events"]
            failure = _actions(events, "failure")
            if failure:
                for e in events:
                    if e["action"] == "LostWork":
                        now += e["at_fraction"] * it_s
                now += price_actions(cluster, failure)
            now += it_s
            now += price_actions(cluster, _actions(events, "iteration_end"))
        out.append((row["iteration"], now, row["val_loss"]))
        if target is not None and row["val_loss"] is not None and row["val_loss"] <= target and math.isinf(ttt):
            ttt = now
    return {"rows": out, "time_to_target_s": ttt if math.isfinite(ttt) else None, "iteration_s": it_s}
