"""The same simulated run priced on another cluster, without training it again.

A run's losses, failures and strategy actions do not depend on the cluster when the failure model
is per iteration (`bernoulli`, with or without `mid_iteration`) and the strategy's decisions do not
read seconds: only the clock does. `reprice` walks a run record's rows and adds, per step, what
`simulator.run.run_one` adds (its module docstring): the failure actions (one `simulator.cost.price`
call, in order), the lost partial work (`at_fraction x` the new iteration time), the new iteration
time of the strategy's schedule (`simulate_iteration` with its forward multiplier, CheckFree+ swaps
and Bamboo redundant forwards, or `redundant_overhead x` the plain pipeline's), the blocking
iteration-end actions, and what the background ones (`Transfer.background`) take beyond one
iteration. Action seconds are multiplied by the record's `action_time_scale` (issue 15), and bytes
are the cluster's modelled model's when the actions say their content. On the record's own cluster
this reproduces `sim_time_s` of every row (tested), so a table can show one sweep on several
clusters. Not valid for `hourly` / trace failure models (their draws depend on the clock), for
strategies whose decisions read seconds from their knobs (`adaptive`, `checkpoint` /
`neighbour_copy` / `gemini` with an `"auto"` interval): run those again; nor for a record with
actions of unsaid content (`actions_scaled`) on a cluster that models another model.
"""

from __future__ import annotations

import math
from typing import Any

from collections.abc import Sequence

from simulator.cluster import Cluster
from simulator.cost import ACTION_KINDS, price
from simulator.errors import SimulationError
from simulator.schedule import simulate_iteration

__all__ = ["reprice", "schedule_hooks", "SECONDS_READING_STRATEGIES"]

SECONDS_READING_STRATEGIES = ("adaptive",)


def schedule_hooks(strategy: str, knobs: dict[str, Any], n_stages: int) -> dict[str, Any]:
    """`reprice`'s keyword arguments for a registered strategy's schedule (n_stages: indices 0..S).

    CheckFree+ swaps odd micro-batches; redundant computation runs its ring successor's forward
    (`forward_cost="bamboo"`, the default) or doubles every forward (`"double"`); the others change
    nothing (trainer/strategies).
    """
    if strategy == "checkfree_plus":
        return {"swap_odd": True}
    if strategy == "redundant":
        if knobs.get("forward_cost", "bamboo") == "double":
            return {"forward_multiplier": 2.0}
        return {"redundant_of": tuple((s + 1) % n_stages for s in range(n_stages))}
    return {}


def _actions(events: list[dict[str, Any]], phases: tuple[str, ...]) -> list[Any]:
    from trainer.strategies.base import Restart, Rollback, StorageRead, StorageWrite, Transfer

    table = {"Transfer": Transfer, "StorageWrite": StorageWrite, "StorageRead": StorageRead, "Restart": Restart,
             "Rollback": Rollback}
    out = []
    for e in events:
        if e.get("phase") not in phases or e["action"] not in ACTION_KINDS:
            continue
        fields = {k: v for k, v in e.items() if k not in ("action", "phase", "cost_s")}
        if "of_stages" in fields:
            fields["of_stages"] = tuple(fields["of_stages"])
        out.append(table[e["action"]](**fields))
    return out


def reprice(record: dict[str, Any], cluster: Cluster, *, forward_multiplier: float = 1.0, swap_odd: bool = False,
            redundant_of: Sequence[int | None] | None = None, micro_batches: int = 4, schedule: str = "gpipe",
            knobs_from_this_cluster: bool = False) -> dict[str, Any]:
    """{"rows": [(iteration, sim_time_s, val_loss)...], "time_to_target_s", "iteration_s"} on `cluster`.

    `record`: a simulated run (`run_one`) or a real one (`simulator.real.run_real`, whose event
    sequence is the simulated run's, tested in tests/distributed). `forward_multiplier` /
    `swap_odd` / `redundant_of`: the strategy's (`RecoveryStrategy.forward_multiplier`, every stage
    alike, `swap_on_odd_microbatches`, and `redundant_forward_of` per stage 0..S, None for none).
    `micro_batches` is ignored when the cluster models a model with its own micro-batch count (as
    in `run_one`). `knobs_from_this_cluster`: the seconds a strategy read from its knobs came from
    `cluster`, so its decisions stand. Raises `SimulationError` for the cases of the module docstring.
    """
    spec = record.get("spec", {})
    if spec.get("failure_model", "bernoulli") != "bernoulli":
        raise SimulationError(f"cannot reprice a {spec.get('failure_model')!r} run: its failures depend on the clock")
    if record["key"]["strategy"] in SECONDS_READING_STRATEGIES and not knobs_from_this_cluster:
        raise SimulationError(f"cannot reprice {record['key']['strategy']!r}: its decisions read seconds")
    if record.get("actions_scaled") and cluster.model is not None:
        raise SimulationError(f"cannot reprice on {cluster.name!r}: {record['actions_scaled']} actions of the run do "
                              f"not say their content, and the cluster models {cluster.model.name!r}")
    scale = float(spec.get("action_time_scale", 1.0))
    m = (cluster.model.micro_batches if cluster.model is not None else 0) or micro_batches
    succ = tuple(redundant_of) if redundant_of is not None else (None,) * cluster.n_stages
    if len(succ) != cluster.n_stages:
        raise SimulationError(f"redundant_of names {len(succ)} stages, the cluster has {cluster.n_stages}")
    it_s = simulate_iteration(cluster, m, schedule=schedule, forward_multiplier=lambda s: forward_multiplier,
                              swap_odd=swap_odd, redundant_of=lambda s: succ[s]).iteration_s
    overhead = spec.get("redundant_overhead")
    if overhead is not None and (forward_multiplier != 1.0 or any(x is not None for x in succ)):
        it_s = overhead * simulate_iteration(cluster, m, schedule=schedule, swap_odd=swap_odd).iteration_s

    def seconds(actions: list[Any], concurrent: bool = False) -> float:
        return price(cluster, actions, concurrent=concurrent).seconds * scale

    now, out, ttt = 0.0, [], math.inf
    target = record.get("target_loss")
    for row in record["rows"]:
        if row["step"] > 0:
            events = row["strategy_events"] if "strategy_events" in row else row["events"]
            failure = _actions(events, ("failure",))
            if failure:
                for e in events:
                    if e["action"] == "LostWork":
                        now += e["at_fraction"] * it_s
                now += seconds(failure)
            now += it_s
            end = _actions(events, ("iteration_end", "background"))
            now += seconds([a for a in end if not getattr(a, "background", False)])
            background = [a for a in end if getattr(a, "background", False)]
            if background:  # overlapped with the next iteration: only what outlasts it costs
                now += max(0.0, seconds(background, concurrent=True) - it_s)
        out.append((row["iteration"], now, row["val_loss"]))
        if target is not None and row["val_loss"] is not None and row["val_loss"] <= target and math.isinf(ttt):
            ttt = now
    return {"rows": out, "time_to_target_s": ttt if math.isfinite(ttt) else None, "iteration_s": it_s}
