"""Pipeline schedules for the real run: which operation each stage process runs, in which order.

The same schedules as the simulator (simulator/schedule.py, docs/simulator.md section 2), which the
trainer may not import (DESIGN.md section 2: `trainer <- simulator`); tests check that both give the
same order at every pipeline position.

- A micro-batch visits the positions of its *route*: `(0, 1, ..., S, 0)` (CheckFree's layout: the
  embedding stage 0 embeds first and runs the head last). With CheckFree+ swaps, odd micro-batches
  visit stages 1<->2 and S-1<->S exchanged (arXiv 2506.15461 section 4.2).
- At pipeline position p of P, GPipe (Huang et al. 2019) runs F0..F(M-1) then B0..B(M-1); 1F1B
  (PipeDream-Flush, Narayanan et al. 2021) runs `min(P - p - 1, M)` warm-up forwards, then one
  forward and one backward alternately, then the remaining backwards.

A process that serves several positions (stage 0 always: the embedding at position 0 and the head
at P-1; stages 1, 2, S-1, S under CheckFree+ swaps) runs one sequence of operations. The simulator
gives each position its own worker sharing the node's compute first come, first served; a real
process needs a fixed order. `stage_programs` takes it from an event simulation of the whole
pipeline with unit operation times and free links, in which each node picks, among the next
operations of its positions whose input has arrived, the one that has waited longest (ties: the
lower position). A transformer stage runs its backwards in micro-batch order even when they belong
to two positions (CheckFree+), so its gradient accumulates in the in-process trainer's order and
the sums are bit-identical; stage 0's two positions touch different parameters (embedding, head).
Each node's order is then a linear extension of a valid execution: every operation's input is
produced by an operation that comes earlier in that execution, so processes that block on
receives and never block on sends cannot deadlock.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["SCHEDULES", "FORWARD", "BACKWARD", "Op", "op_order", "route", "routes", "stage_programs"]

SCHEDULES = ("gpipe", "1f1b")
FORWARD, BACKWARD = 0, 1  # the simulator's _F, _B


@dataclass(frozen=True, order=True)
class Op:
    """One operation: `kind` (FORWARD or BACKWARD) of micro-batch `micro_batch` at pipeline `position`."""

    kind: int
    micro_batch: int
    position: int


def op_order(schedule: str, position: int, n_positions: int, n_micro_batches: int) -> list[tuple[int, int]]:
    """(kind, micro_batch) operations of one pipeline position in execution order."""
    m = n_micro_batches
    if schedule == "gpipe":
        return [(FORWARD, i) for i in range(m)] + [(BACKWARD, i) for i in range(m)]
    if schedule == "1f1b":
        warmup = min(n_positions - position - 1, m)
        ops = [(FORWARD, i) for i in range(warmup)]
        for i in range(m - warmup):
            ops += [(FORWARD, warmup + i), (BACKWARD, i)]
        ops += [(BACKWARD, i) for i in range(m - warmup, m)]
        return ops
    raise ValueError(f"unknown pipeline schedule {schedule!r}; known: {', '.join(SCHEDULES)}")


def route(n_stages: int, micro_batch: int, swap_odd: bool = False) -> tuple[int, ...]:
    """Stages visited by `micro_batch`: (0, 1..S, 0), with CheckFree+'s swaps on odd micro-batches."""
    middle = list(range(1, n_stages + 1))
    if swap_odd and micro_batch % 2 == 1:
        middle[0], middle[1] = middle[1], middle[0]
        if n_stages > 2:
            middle[-2], middle[-1] = middle[-1], middle[-2]
    return (0, *middle, 0)


def routes(n_stages: int, n_micro_batches: int, swap_odd: bool = False) -> tuple[tuple[int, ...], ...]:
    """The route of every micro-batch of an iteration."""
    return tuple(route(n_stages, i, swap_odd) for i in range(n_micro_batches))


def stage_programs(schedule: str, the_routes: tuple[tuple[int, ...], ...],
                   forward_only: bool = False) -> dict[int, list[Op]]:
    """Each stage's operations in the order its process runs them (module docstring).

    `forward_only` (evaluation): forwards only, each position in micro-batch order.
    """
    m, n_pos = len(the_routes), len(the_routes[0])
    queues: dict[tuple[int, int], list[tuple[int, int]]] = {}  # (stage, position) -> ops left
    for p in range(n_pos):
        order = [(FORWARD, i) for i in range(m)] if forward_only else op_order(schedule, p, n_pos, m)
        for kind, i in order:
            queues.setdefault((the_routes[i][p], p), []).append((kind, i))
    done_at: dict[tuple[int, int, int], int] = {}  # (kind, mb, position) -> finish time

    def input_time(kind: int, i: int, p: int) -> int | None:
        if kind == FORWARD:
            return 0 if p == 0 else done_at.get((FORWARD, i, p - 1))
        if p == n_pos - 1:
            return done_at.get((FORWARD, i, p))  # the loss is computed where the head is
        return done_at.get((BACKWARD, i, p + 1))

    programs: dict[int, list[Op]] = {s: [] for s, _ in queues}
    backwards_left = {s: sorted(i for (q_s, _p), q in queues.items() if q_s == s for k, i in q if k == BACKWARD)
                      for s in programs}
    node_free: dict[int, int] = {s: 0 for s in programs}
    position_free: dict[tuple[int, int], int] = {key: 0 for key in queues}
    remaining = sum(len(q) for q in queues.values())
    now = 0
    while remaining:
        progressed = False
        for stage in sorted(programs):
            if node_free[stage] > now:
                continue
            best = None
            for (s, p), q in sorted(queues.items(), key=lambda kv: kv[0][1]):
                if s != stage or not q:
                    continue
                ready = input_time(q[0][0], q[0][1], p)
                if ready is None or ready > now:
                    continue
                if stage != 0 and q[0][0] == BACKWARD and q[0][1] != backwards_left[stage][0]:
                    continue  # an earlier micro-batch's backward first (gradient accumulation order)
                waited_since = max(ready, position_free[(s, p)])
                if best is None or waited_since < best[0]:
                    best = (waited_since, p)
            if best is None:
                continue
            p = best[1]
            kind, i = queues[(stage, p)].pop(0)
            programs[stage].append(Op(kind, i, p))
            if kind == BACKWARD:
                backwards_left[stage].remove(i)
            done_at[(kind, i, p)] = now + 1
            node_free[stage] = position_free[(stage, p)] = now + 1
            remaining -= 1
            progressed = True
        if not progressed and all(t <= now for t in node_free.values()):  # pragma: no cover - a schedule bug
            raise RuntimeError(f"schedule {schedule!r} deadlocks at unit time {now}")
        now += 1  # every operation takes one unit
    return programs
