"""The real run's schedules are the simulator's, and its per-process orders cannot deadlock."""

from __future__ import annotations

import random

import pytest
from hypothesis import given
from hypothesis import strategies as st

from simulator.cluster import Cluster, LinkSpec
from simulator.schedule import _op_order, route
from trainer.distributed.pipeline_schedule import BACKWARD, FORWARD, op_order, routes, stage_programs


def _cluster(n_stages: int) -> Cluster:
    n = n_stages + 1
    return Cluster(name="t", stage_forward_s=(1.0,) * n, stage_backward_s=(2.0,) * n, activation_bytes=1,
                   stage_gradient_bytes=(1,) * n, default_link=LinkSpec(0.0, 1e9), storage_bytes_per_s=1.0,
                   restart_delay_s=0.0)


@pytest.mark.parametrize("schedule", ["gpipe", "1f1b"])
@pytest.mark.parametrize("n_positions, m", [(3, 1), (4, 2), (6, 4), (7, 6), (8, 3)])
def test_op_order_is_the_simulators(schedule, n_positions, m):
    for p in range(n_positions):
        assert op_order(schedule, p, n_positions, m) == _op_order(schedule, p, n_positions, m)


@pytest.mark.parametrize("n_stages", [2, 3, 4, 6])
@pytest.mark.parametrize("swap", [False, True])
def test_routes_are_the_simulators(n_stages, swap):
    assert routes(n_stages, 5, swap) == tuple(route(_cluster(n_stages), i, swap) for i in range(5))


def _execute(programs, the_routes, durations) -> bool:
    """Run the programs as blocking processes (receives block, sends do not); True if all finish."""
    n_pos = len(the_routes[0])
    done: dict[tuple[int, int, int], float] = {}
    clock = {s: 0.0 for s in programs}
    index = {s: 0 for s in programs}
    progressed = True
    while progressed:
        progressed = False
        for s, prog in programs.items():
            while index[s] < len(prog):
                op = prog[index[s]]
                if op.kind == FORWARD:
                    dep = None if op.position == 0 else (FORWARD, op.micro_batch, op.position - 1)
                elif op.position == n_pos - 1:
                    dep = (FORWARD, op.micro_batch, op.position)
                else:
                    dep = (BACKWARD, op.micro_batch, op.position + 1)
                if dep is not None and dep not in done:
                    break  # blocked on a receive
                start = max(clock[s], done.get(dep, 0.0))
                clock[s] = done[(op.kind, op.micro_batch, op.position)] = start + durations[s]
                index[s] += 1
                progressed = True
    return all(index[s] == len(p) for s, p in programs.items())


@given(n_stages=st.integers(2, 6), m=st.integers(1, 8), swap=st.booleans(), schedule=st.sampled_from(["gpipe", "1f1b"]),
       seed=st.integers(0, 10_000), forward_only=st.booleans())
def test_programs_cover_every_operation_in_position_order_and_never_deadlock(n_stages, m, swap, schedule, seed,
                                                                            forward_only):
    the_routes = routes(n_stages, m, swap)
    programs = stage_programs(schedule, the_routes, forward_only=forward_only)
    n_pos = len(the_routes[0])
    for p in range(n_pos):
        order = [(FORWARD, i) for i in range(m)] if forward_only else op_order(schedule, p, n_pos, m)
        ran = [(op.kind, op.micro_batch) for s in programs for op in programs[s] if op.position == p]
        assert sorted(ran) == sorted(order)
        for s, prog in programs.items():  # each process keeps each position's order
            mine = [(op.kind, op.micro_batch) for op in prog if op.position == p]
            assert mine == [o for o in order if the_routes[o[1]][p] == s]
    rng = random.Random(seed)
    durations = {s: rng.uniform(0.1, 3.0) for s in programs}
    assert _execute(programs, the_routes, durations)


def test_backward_runs_micro_batches_in_order_on_every_stage():
    """Gradient accumulation adds micro-batches in the in-process trainer's order (bit-identical sums)."""
    for swap in (False, True):
        for schedule in ("gpipe", "1f1b"):
            programs = stage_programs(schedule, routes(4, 6, swap))
            for s, prog in programs.items():
                for position in {op.position for op in prog}:
                    mbs = [op.micro_batch for op in prog if op.kind == BACKWARD and op.position == position]
                    assert mbs == sorted(mbs)
                if s != 0:
                    mbs = [op.micro_batch for op in prog if op.kind == BACKWARD]
                    assert mbs == sorted(mbs), (s, swap, schedule)
