"""Pipeline schedules (GPipe, 1F1B) simulated message by message with simpy.

One training iteration of a pipeline: every DP replica pushes ``M`` micro-batches through
the pipeline positions (forward), back again (backward), then every stage all-reduces its
gradients among its replicas. Actors are simpy processes:

- one *position worker* per (pipeline position, node): it runs the forward / backward
  operations that node runs at that position, in the schedule's order, each as soon as its
  input message has arrived and the node's compute (a capacity-1 ``Resource``) is free.
  Without swaps this is one worker per position and replica; with CheckFree+ swaps a node
  serves two positions and its two workers share its compute first come, first served;
- one *send* process per message, which takes the directed link (a capacity-1
  ``Resource``) for the serialisation time ``nbytes / bytes_per_s`` and then lets the
  message travel ``latency_s`` (propagation does not occupy the link), so an uncontended
  message costs ``latency_s + nbytes / bytes_per_s`` (`simulator.cluster.LinkSpec`);
- one *all-reduce* process per stage, which waits until every replica of the stage has run
  its last backward and then takes ``Cluster.allreduce_s(stage)``;
- with ``Cluster.host_cores`` set, operations hold the node and then get their CPU seconds from
  one `simulator.host.SharedHost` (processor sharing among every node of the host).

The iteration time is when the last all-reduce ends, plus the cluster's ``update_s`` (the optimizer
step and, in the real run, its commit round trip; 0 in the other presets); it comes out of the model.

Schedules (operation order at pipeline position p of P, micro-batches 0..M-1):
- GPipe (Huang et al., NeurIPS 2019): all forwards F0..F(M-1), then all backwards B0..B(M-1).
- 1F1B (PipeDream-Flush, Narayanan et al., ICML 2021): ``w = min(P - p - 1, M)`` warm-up
  forwards, then alternately one forward and one backward, then the remaining backwards.
Both take ``(M + P - 1)(t_f + t_b)`` with equal stage times and ideal links
(tests/simulator/test_schedule.py checks it exactly).

Strategy hooks (docs/harness-contract.md): ``forward_multiplier(stage)`` scales that stage's
forward seconds, and ``swap_odd=True`` applies the CheckFree+ hop order on odd micro-batches
(stages 1<->2 and S-1<->S change places, so those micro-batches use other links).

Redundant computation, event model of Bamboo's design (Thorpe et al., NSDI'23, section 4:
"redundant computation" filled into pipeline bubbles; ``redundant_of(stage)`` names the stage
whose forward ``stage`` also runs, trainer hook ``redundant_forward_of``):

- after each forward whose output goes on to the next position, the node also runs its
  successor's forward on its replica (``stage_forward_s[successor]``) as a *low-priority*
  operation on the same compute resource (a simpy ``PriorityResource``): it only takes the
  node when no regular operation is waiting, and once started it runs to the end (no
  preemption), so a regular operation that becomes ready meanwhile waits for it;
- its activations (one hop, ``activation_bytes``) are stashed in host memory for a later
  redundant backward: a copy at ``host_bytes_per_s`` on the node's host link, which does not
  hold the compute; the iteration ends when every such copy has ended too (ours: Bamboo keeps
  the redundant forward's results for recovery; we count one hop of activations);
- the replica's memory: each node holds its own stage and its successor's (parameters and Adam
  state, 3 x the stage's gradient bytes each); ``peak_node_bytes`` reports the largest. When
  ``Cluster.node_memory_bytes`` is set and exceeded, the excess is swapped out to host memory and
  back once per iteration (2 x excess / ``host_bytes_per_s``, holding the node's compute at the
  start of the iteration). The replica refresh (new weights each iteration) is a background
  transfer priced by `simulator.cost`, not here.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import simpy

from simulator.cluster import Cluster
from simulator.errors import SimulationError
from simulator.host import SharedHost

__all__ = ["SCHEDULES", "IterationTiming", "route", "simulate_iteration"]

SCHEDULES = ("gpipe", "1f1b")

_F, _B = 0, 1  # operation kinds: forward, backward


@dataclass(frozen=True)
class IterationTiming:
    """Timings of one simulated iteration (seconds)."""

    iteration_s: float  # the last all-reduce ends (or the last backward with one replica), plus update_s
    pipeline_s: float  # the last backward of any node ends
    messages: int  # point-to-point messages sent (activations forward, gradients back)
    redundant_s: float = 0.0  # compute seconds of redundant forwards (Bamboo event model), all nodes
    peak_node_bytes: int = 0  # largest parameter + Adam bytes one node holds (own stage + replica)


def route(cluster: Cluster, micro_batch: int, swap_odd: bool = False) -> tuple[int, ...]:
    """The stages a micro-batch visits, in order (its pipeline positions).

    ``(0, 1, ..., S, 0)`` with ``head_on_stage0`` (embedding, transformer stages, head),
    else ``(0, 1, ..., S)``. With ``swap_odd`` and an odd micro-batch, stages 1<->2 and
    S-1<->S swap positions, in that order (CheckFree+, arXiv 2506.15461 section 4.2), exactly
    as ``trainer.pipeline.PipelineTrainer.stage_order``: S = 2 gives (2, 1), S = 3 composes the
    overlapping swaps into (2, 3, 1), S >= 4 gives (2, 1, 3, ..., S, S-1).
    """
    s = cluster.n_stages - 1
    middle = list(range(1, s + 1))
    if swap_odd and micro_batch % 2 == 1:
        middle[0], middle[1] = middle[1], middle[0]
        if s > 2:
            middle[-2], middle[-1] = middle[-1], middle[-2]
    tail = (0,) if cluster.head_on_stage0 else ()
    return (0, *middle, *tail)


def _op_order(schedule: str, position: int, n_positions: int, n_micro_batches: int) -> list[tuple[int, int]]:
    """(kind, micro_batch) operations of one position in execution order."""
    m = n_micro_batches
    if schedule == "gpipe":
        return [(_F, i) for i in range(m)] + [(_B, i) for i in range(m)]
    if schedule == "1f1b":
        warmup = min(n_positions - position - 1, m)
        ops = [(_F, i) for i in range(warmup)]
        for i in range(m - warmup):
            ops += [(_F, warmup + i), (_B, i)]
        ops += [(_B, i) for i in range(m - warmup, m)]
        return ops
    raise SimulationError(f"unknown pipeline schedule {schedule!r}; known: {', '.join(SCHEDULES)}")


def simulate_iteration(
    cluster: Cluster,
    n_micro_batches: int,
    *,
    schedule: str = "1f1b",
    forward_multiplier: Callable[[int], float] | None = None,
    swap_odd: bool = False,
    redundant_of: Callable[[int], int | None] | None = None,
) -> IterationTiming:
    """Simulate one iteration of ``n_micro_batches`` micro-batches; return its timings (s).

    ``redundant_of(stage)``: the stage whose forward ``stage`` also runs (Bamboo event model,
    module docstring), None for none. Raises `SimulationError` for a bad schedule name, a
    non-positive multiplier or micro-batch count, or a redundant successor that does not exist.
    """
    if not isinstance(n_micro_batches, int) or n_micro_batches < 1:
        raise SimulationError(f"n_micro_batches must be an int >= 1, got {n_micro_batches!r}")
    if schedule not in SCHEDULES:
        raise SimulationError(f"unknown pipeline schedule {schedule!r}; known: {', '.join(SCHEDULES)}")
    mult = [1.0 if forward_multiplier is None else float(forward_multiplier(s)) for s in range(cluster.n_stages)]
    for s, x in enumerate(mult):
        if not x > 0:
            raise SimulationError(f"forward_multiplier({s}) must be > 0, got {x!r}")
    succ = [None if redundant_of is None else redundant_of(s) for s in range(cluster.n_stages)]
    for s, x in enumerate(succ):
        if x is not None and not (isinstance(x, int) and 0 <= x < cluster.n_stages):
            raise SimulationError(f"redundant_forward_of({s}) = {x!r} is not a stage (0..{cluster.n_stages - 1})")

    env = simpy.Environment()
    m = n_micro_batches
    routes = [route(cluster, i, swap_odd) for i in range(m)]
    n_pos = len(routes[0])
    replicas = range(cluster.dp_replicas)
    nodes = [(s, r) for s in range(cluster.n_stages) for r in replicas]
    compute = {node: simpy.PriorityResource(env, capacity=1) for node in nodes}
    host_link = {node: simpy.Resource(env, capacity=1) for node in nodes}  # host memory copies
    shared = None if cluster.host_cores is None else SharedHost(env, cluster.host_cores, cluster.host_load)
    state_bytes = [3 * g for g in cluster.stage_gradient_bytes]  # parameters + Adam (2x), fp32
    node_bytes = {node: state_bytes[node[0]] + (state_bytes[succ[node[0]]] if succ[node[0]] is not None else 0)
                  for node in nodes}
    redundant_s = [0.0]
    links: dict[tuple[tuple[int, int], tuple[int, int]], simpy.Resource] = {}
    # ready[(kind, position, replica, micro_batch)]: that operation's input has arrived
    ready = {(k, p, r, i): env.event() for k in (_F, _B) for p in range(n_pos) for r in replicas for i in range(m)}
    # each node's backward count; when it reaches zero the stage replica may all-reduce
    pending_b = {node: 0 for node in nodes}
    for r in replicas:
        for i in range(m):
            for p in range(n_pos):
                pending_b[(routes[i][p], r)] += 1
    node_done = {node: env.event() for node in nodes}
    messages = [0]
    last_backward_s = [0.0]

    def op_seconds(kind: int, stage: int, position: int) -> float:
        if cluster.head_on_stage0 and stage == 0 and position == 0:
            return 0.0  # the embedding lookup is a gather; stage 0's time is the head's
        if kind == _F:
            return cluster.stage_forward_s[stage] * mult[stage]
        return cluster.stage_backward_s[stage]

    def send(src: tuple[int, int], dst: tuple[int, int], arrived: simpy.Event):
        """One message of ``activation_bytes`` from node src to node dst."""
        messages[0] += 1
        if src != dst:
            spec = cluster.link(src, dst)
            link = links.setdefault((src, dst), simpy.Resource(env, capacity=1))
            with link.request() as req:  # one transfer at a time per directed link
                yield req
                yield env.timeout(cluster.activation_bytes / spec.bytes_per_s)
            yield env.timeout(spec.latency_s)
        arrived.succeed()

    def redundant_forward(node: tuple[int, int]):
        """Bamboo's redundant forward of the successor, in the node's bubbles, then its stash."""
        with compute[node].request(priority=1) as req:  # regular operations (priority 0) go first
            yield req
            seconds = cluster.stage_forward_s[succ[node[0]]]
            redundant_s[0] += seconds
            if shared is None:
                yield env.timeout(seconds)
            else:  # CPU seconds on the shared host, like any other operation
                yield from shared.run(seconds)
        with host_link[node].request() as req:  # activations to host memory, off the compute
            yield req
            yield env.timeout(cluster.activation_bytes / cluster.host_bytes_per_s)

    def spill(node: tuple[int, int], nbytes: int):
        """Swap what does not fit in the node's memory out and back in, once per iteration."""
        with compute[node].request(priority=0) as req:
            yield req
            yield env.timeout(2 * nbytes / cluster.host_bytes_per_s)

    if cluster.node_memory_bytes is not None:
        for node in nodes:
            if succ[node[0]] is not None and node_bytes[node] > cluster.node_memory_bytes:
                env.process(spill(node, node_bytes[node] - cluster.node_memory_bytes))

    def position_worker(p: int, stage: int, r: int):
        """The operations node (stage, r) runs at pipeline position p, in schedule order."""
        for kind, i in _op_order(schedule, p, n_pos, m):
            if routes[i][p] != stage:
                continue  # a CheckFree+ swap put another node at this position for micro-batch i
            yield ready[(kind, p, r, i)]
            node = (routes[i][p], r)
            with compute[node].request(priority=0) as req:
                yield req
                if shared is None:
                    yield env.timeout(op_seconds(kind, node[0], p))
                else:  # one machine's cores shared by every stage process (simulator/host.py)
                    yield from shared.run(op_seconds(kind, node[0], p))
            if kind == _F:
                if p + 1 < n_pos and succ[node[0]] is not None:
                    env.process(redundant_forward(node))
                if p + 1 < n_pos:
                    env.process(send(node, (routes[i][p + 1], r), ready[(_F, p + 1, r, i)]))
                else:
                    ready[(_B, p, r, i)].succeed()  # the loss is computed where the head is
            else:
                if p > 0:
                    env.process(send(node, (routes[i][p - 1], r), ready[(_B, p - 1, r, i)]))
                last_backward_s[0] = max(last_backward_s[0], env.now)
                pending_b[node] -= 1
                if pending_b[node] == 0:
                    node_done[node].succeed()

    def allreduce(stage: int):
        """The ring all-reduce of one stage's gradients, after all its replicas finished."""
        yield env.all_of([node_done[(stage, r)] for r in replicas])
        yield env.timeout(cluster.allreduce_s(stage))

    for r in replicas:
        for i in range(m):
            ready[(_F, 0, r, i)].succeed()  # data is local to the first position
        for p in range(n_pos):
            for stage in sorted({rt[p] for rt in routes}):
                env.process(position_worker(p, stage, r))
    reducers = [env.process(allreduce(s)) for s in range(cluster.n_stages)]
    env.run()
    if not all(proc.processed for proc in reducers):  # pragma: no cover - a schedule bug
        raise SimulationError(f"schedule {schedule!r} deadlocked at t={env.now} s")
    return IterationTiming(iteration_s=env.now + cluster.update_s, pipeline_s=last_backward_s[0],
                           messages=messages[0], redundant_s=redundant_s[0],
                           peak_node_bytes=max(node_bytes.values()))
