"""A host's cores shared by the stage processes (simulator/host.py) and the calibration fits."""

from __future__ import annotations

import pytest
import simpy
from hypothesis import given
from hypothesis import strategies as st

from simulator.calibrate import fit_host_load, fit_link, stage_times
from simulator.cluster import Cluster, LinkSpec
from simulator.errors import SimulationError
from simulator.host import SharedHost, fair_share_rate
from simulator.schedule import simulate_iteration


def _finish_times(jobs, cores, load):
    env, ends = simpy.Environment(), {}
    host = SharedHost(env, cores, load)

    def job(name, start, cpu):
        yield env.timeout(start)
        yield from host.run(cpu)
        ends[name] = env.now

    for name, (start, cpu) in jobs.items():
        env.process(job(name, start, cpu))
    env.run()
    return ends


def test_processor_sharing_by_hand():
    assert _finish_times({"a": (0, 1.0), "b": (0, 1.0)}, 1, 0) == {"a": 2.0, "b": 2.0}
    assert _finish_times({"a": (0, 1.0), "b": (0, 1.0)}, 2, 0) == {"a": 1.0, "b": 1.0}
    # b arrives at 0.5: a has 0.5 left, both at rate 1/2 until a ends at 1.5, then b alone
    assert _finish_times({"a": (0, 1.0), "b": (0.5, 1.0)}, 1, 0) == pytest.approx({"a": 1.5, "b": 2.0})
    assert _finish_times({"a": (0, 1.0)}, 2, 7) == pytest.approx({"a": 4.0})  # share 2 / (1 + 7)
    assert fair_share_rate(3, 2.0, 7.0) == pytest.approx(0.2) and fair_share_rate(0, 2.0, 0.0) == 0.0
    with pytest.raises(SimulationError, match="host cores must be a finite number > 0"):
        SharedHost(simpy.Environment(), 0, 0)


@given(cpu=st.lists(st.floats(0.01, 3.0), min_size=1, max_size=6), cores=st.floats(0.5, 4.0),
       load=st.floats(0.0, 8.0))
def test_work_is_conserved(cpu, cores, load):
    """Jobs started together: the host delivers rate(k) x k CPU-s per s, so the last ends when all work is done."""
    ends = _finish_times({i: (0.0, c) for i, c in enumerate(cpu)}, cores, load)
    delivered, t = 0.0, 0.0
    left = sorted(cpu)
    for i, c in enumerate(left):  # by hand: the smallest job ends first, rates change as jobs leave
        k = len(left) - i
        rate = fair_share_rate(k, cores, load)
        step = (c - delivered) / rate
        t += step
        delivered = c
    assert max(ends.values()) == pytest.approx(t, rel=1e-9)


def _cluster(**over) -> Cluster:
    n = 5
    kw = dict(name="t", stage_forward_s=(0.1,) * n, stage_backward_s=(0.2,) * n, activation_bytes=0,
              stage_gradient_bytes=(0,) * n, default_link=LinkSpec(0.0, float("inf")), storage_bytes_per_s=1.0,
              restart_delay_s=0.0)
    kw.update(over)
    return Cluster(**kw)


def test_one_core_serialises_all_work_and_enough_cores_change_nothing():
    m = 4
    dedicated = simulate_iteration(_cluster(), m, schedule="gpipe").iteration_s
    assert simulate_iteration(_cluster(host_cores=6.0), m, schedule="gpipe").iteration_s == pytest.approx(dedicated)
    # one core, free links: some operation is always ready, so the iteration is the total CPU work; the
    # embedding lookup at position 0 costs nothing (head_on_stage0), stage 0's time is its head's
    total = m * 5 * (0.1 + 0.2)
    assert simulate_iteration(_cluster(host_cores=1.0), m, schedule="gpipe").iteration_s == pytest.approx(total)
    # one micro-batch is a chain, one operation at a time: with one other runnable thread, half speed
    chain = 5 * (0.1 + 0.2)
    assert simulate_iteration(_cluster(host_cores=1.0, host_load=1.0), 1, schedule="gpipe").iteration_s \
        == pytest.approx(2 * chain)
    assert Cluster.from_dict(_cluster(host_cores=2.0, host_load=3.5).to_dict()).host_load == 3.5


def test_calibration_fits():
    link = fit_link({100: 2 * (1e-4 + 400 / 1e9), 400: 2 * (1e-4 + 1600 / 1e9), 1600: 2 * (1e-4 + 6400 / 1e9)})
    assert link.latency_s == pytest.approx(1e-4) and link.bytes_per_s == pytest.approx(1e9)
    rates = {k: 2.0 / (k + 7.0) for k in range(1, 6)}
    assert fit_host_load(rates, 2.0) == pytest.approx(7.0)
    assert fit_host_load({1: 1.0, 2: 0.99}, 2.0) == 0.0  # an idle host
    ops = [{0: [[0, 0, 0, 0.5, 0.0, 0.01], [0, 0, 5, 0.5, 0.0, 0.02], [1, 0, 5, 0.5, 0.0, 0.03],
                [1, 0, 0, 0.5, 0.0, 0.04]],
            1: [[0, 0, 1, 0.5, 0.0, 0.05], [1, 0, 1, 0.5, 0.0, 0.07]]}]
    fwd, bwd = stage_times(ops, 1)
    assert fwd == pytest.approx((0.03, 0.05)) and bwd == pytest.approx((0.07, 0.07))  # stage 0: embed + head
    wall_f, _ = stage_times(ops, 1, column=3)
    assert wall_f == pytest.approx((1.0, 0.5))


def test_host_load_read_off_a_runs_own_operations():
    from simulator.calibrate import host_load_from_ops

    # two stages computing over the same 0.1 s (k = 2), a third alone for 0.2 s (k = 1): in aggregate
    # 0.09 CPU s in 0.4 s (share 0.225) at a mean k of (2 * 0.1 + 2 * 0.1 + 1 * 0.2) / 0.4 = 1.5
    ops = [{1: [[0, 0, 1, 0.1, 0.0, 0.03, 0.02, 10.0]], 2: [[0, 0, 2, 0.1, 0.0, 0.03, 0.02, 10.0]],
            3: [[0, 0, 3, 0.2, 0.0, 0.06, 0.05, 11.0]]}]
    assert host_load_from_ops(ops, 2.0) == pytest.approx(2.0 / 0.225 - 1.5)
    idle = [{1: [[0, 0, 1, 0.1, 0.0, 0.1, 0.1, 0.0]]}]  # full speed: no other load
    assert host_load_from_ops(idle, 2.0) == 0.0
    assert host_load_from_ops([], 2.0) == 0.0


def test_message_delay_read_off_a_runs_own_operations():
    from simulator.calibrate import message_delay_from_ops

    ops = [{1: [[0, 0, 1, 0.1, 0.0, 0.03, 0.02, 10.0, 0.004], [1, 0, 1, 0.1, 0.0, 0.03, 0.02, 11.0, -1.0]],
            2: [[0, 0, 2, 0.1, 0.0, 0.03, 0.02, 10.0, 0.002], [0, 1, 2, 0.1, 0.0, 0.03, 0.02, 10.5, 0.009]]}]
    assert message_delay_from_ops(ops) == pytest.approx(0.005)  # mean of 0.004, 0.002, 0.009; -1 skipped
    assert message_delay_from_ops([{1: [[0, 0, 1, 0.1, 0.0, 0.03, 0.02, 10.0, -1.0]]}]) is None
