"""Pipeline schedule timings against closed-form formulas."""

from __future__ import annotations

import math

import pytest

from simulator.cluster import Cluster, LinkSpec
from simulator.errors import SimulationError
from simulator.schedule import SCHEDULES, route, simulate_iteration


def chain(n_stages: int, t_f: float, t_b: float, *, latency_s: float = 0.0, bytes_per_s: float = math.inf,
          activation_bytes: int = 0, replicas: int = 1, grad_bytes: int = 0, head: bool = False,
          regions=None, region_links=None) -> Cluster:
    return Cluster(name="test", stage_forward_s=(t_f,) * n_stages, stage_backward_s=(t_b,) * n_stages,
                   activation_bytes=activation_bytes, stage_gradient_bytes=(grad_bytes,) * n_stages,
                   dp_replicas=replicas, default_link=LinkSpec(latency_s, bytes_per_s), regions=regions,
                   region_links=region_links or {}, storage_bytes_per_s=1e9, restart_delay_s=0.0,
                   head_on_stage0=head)


@pytest.mark.parametrize("schedule", SCHEDULES)
@pytest.mark.parametrize("m", [1, 2, 5, 8])
@pytest.mark.parametrize("s", [2, 3, 6])
def test_bubble_formula_with_ideal_links(schedule, m, s):
    # GPipe and 1F1B: (M + S - 1)(t_f + t_b) with equal stage times and zero-cost messages
    t_f, t_b = 0.75, 1.5
    got = simulate_iteration(chain(s, t_f, t_b), m, schedule=schedule)
    assert got.iteration_s == pytest.approx((m + s - 1) * (t_f + t_b), abs=1e-12)
    assert got.messages == 2 * (s - 1) * m


@pytest.mark.parametrize("m", [1, 4, 8])
@pytest.mark.parametrize("s", [2, 4, 7])
def test_gpipe_latency_adds_one_hop_per_boundary_each_way(m, s):
    # fill goes S-1 hops forward, drain S-1 hops back: + 2 (S - 1) latency
    lat = 0.2
    got = simulate_iteration(chain(s, 1.0, 2.0, latency_s=lat), m, schedule="gpipe").iteration_s
    assert got == pytest.approx((m + s - 1) * 3.0 + 2 * (s - 1) * lat, abs=1e-12)


@pytest.mark.parametrize("m", [1, 4, 8])
def test_1f1b_latency_at_least_the_gpipe_amount(m):
    s, lat = 4, 0.2
    base = (m + s - 1) * 3.0
    got = simulate_iteration(chain(s, 1.0, 2.0, latency_s=lat), m, schedule="1f1b").iteration_s
    assert got >= base + 2 * (s - 1) * lat - 1e-12
    if m == 1:  # one micro-batch: the schedules coincide
        assert got == pytest.approx(base + 2 * (s - 1) * lat)


def test_single_micro_batch_prices_every_message():
    # one micro-batch: compute of every stage + 2 (S-1) messages of latency + bytes / bandwidth
    s, nbytes, bw, lat = 5, 4_000_000, 1e8, 0.01
    got = simulate_iteration(chain(s, 0.1, 0.2, latency_s=lat, bytes_per_s=bw, activation_bytes=nbytes), 1)
    assert got.iteration_s == pytest.approx(s * 0.3 + 2 * (s - 1) * (lat + nbytes / bw))


def test_link_carries_one_message_at_a_time():
    # zero compute, bandwidth-bound link: M messages serialise on the first hop
    m, nbytes, bw = 6, 1_000_000, 1e7
    got = simulate_iteration(chain(2, 0.0, 0.0, bytes_per_s=bw, activation_bytes=nbytes), m, schedule="gpipe")
    # forwards: M serialised transfers; backwards: M serialised transfers back
    assert got.iteration_s == pytest.approx(2 * m * nbytes / bw)


def test_forward_multiplier_scales_forward_time_only():
    m, s = 4, 3
    got = simulate_iteration(chain(s, 1.0, 2.0), m, schedule="gpipe", forward_multiplier=lambda st: 2.0)
    assert got.iteration_s == pytest.approx((m + s - 1) * (2.0 + 2.0))


def test_allreduce_after_pipeline_uses_ring_formula():
    # zero compute, messages of latency only: stage 0 finishes last, after 2 (S - 1) hops,
    # then its ring all-reduce runs
    r, g, bw, lat, s = 3, 300_000_000, 1e8, 0.05, 3
    c = chain(s, 0.0, 0.0, latency_s=lat, bytes_per_s=bw, replicas=r, grad_bytes=g)
    got = simulate_iteration(c, 2)
    ring = 2 * (r - 1) * (lat + (g / r) / bw)  # Patarasuk & Yuan 2009
    assert c.allreduce_s(0) == pytest.approx(ring)
    assert got.pipeline_s == pytest.approx(2 * (s - 1) * lat)
    assert got.iteration_s == pytest.approx(2 * (s - 1) * lat + ring)


def test_head_on_stage0_routes_back_to_stage0():
    c = chain(4, 1.0, 2.0, head=True)
    assert route(c, 0) == (0, 1, 2, 3, 0)
    # embedding lookup costs 0 s; the head (stage 0's time) runs once per micro-batch at the end
    got = simulate_iteration(c, 1).iteration_s
    assert got == pytest.approx(4 * 3.0)


@pytest.mark.parametrize("s,odd", [(2, (0, 2, 1)), (3, (0, 2, 3, 1)), (6, (0, 2, 1, 3, 4, 6, 5))])
def test_checkfree_plus_swaps_on_odd_micro_batches(s, odd):
    c = chain(s + 1, 1.0, 1.0)
    assert route(c, 0, swap_odd=True) == tuple(range(s + 1))
    assert route(c, 1, swap_odd=True) == odd


def test_swap_changes_time_when_links_differ():
    # slow links everywhere except between neighbours in the normal order
    regions = tuple((f"r{i}",) for i in range(5))
    fast = {(f"r{i}", f"r{i + 1}"): LinkSpec(0.0, math.inf) for i in range(4)}
    c = chain(5, 0.1, 0.2, latency_s=1.0, regions=regions, region_links=fast)
    plain = simulate_iteration(c, 2).iteration_s
    swapped = simulate_iteration(c, 2, swap_odd=True).iteration_s
    assert plain == pytest.approx((2 + 5 - 1) * 0.3)
    assert swapped > plain


@pytest.mark.parametrize("bad,msg", [(0, "n_micro_batches must be an int >= 1, got 0"),
                                     (2.5, "got 2.5")])
def test_bad_micro_batches(bad, msg):
    with pytest.raises(SimulationError, match=msg):
        simulate_iteration(chain(2, 1.0, 1.0), bad)


def test_unknown_schedule():
    with pytest.raises(SimulationError, match="unknown pipeline schedule 'zb'"):
        simulate_iteration(chain(2, 1.0, 1.0), 2, schedule="zb")


@pytest.mark.parametrize("m", [4, 6, 16])
@pytest.mark.parametrize("n_stage_ids", [5, 7])
def test_gpipe_swap_costs_one_backward_slot_per_swapped_pair(m, n_stage_ids):
    # docs/simulator.md section 7: two swapped pairs (1<->2, S-1<->S) add 2 t_b
    t_f, t_b = 1.0, 2.0
    c = chain(n_stage_ids, t_f, t_b, head=True)
    p = n_stage_ids  # timed positions: S transformer stages + the head (the embedding is 0 s)
    assert simulate_iteration(c, m, schedule="gpipe").iteration_s == pytest.approx((m + p - 1) * (t_f + t_b))
    swapped = simulate_iteration(c, m, schedule="gpipe", swap_odd=True).iteration_s
    assert swapped == pytest.approx((m + p - 1) * (t_f + t_b) + 2 * t_b)


# -- Bamboo redundant computation, event model (issue 15) ----------------------------------------

def _ring(n: int):
    return lambda s: (s + 1) % n


@pytest.mark.parametrize("schedule", SCHEDULES)
@pytest.mark.parametrize("s", [2, 3, 6])
def test_redundant_forward_fits_in_the_bubbles_of_one_micro_batch(schedule, s):
    # one micro-batch: node p idles from (p+1) t_f until its backward at s t_f + (s-1-p) t_b; the
    # successor's forward (t_f) fits there when t_b >= t_f, so the iteration keeps s (t_f + t_b); the
    # last position has no successor in the pipe (its output is the loss): s - 1 redundant forwards
    t_f, t_b = 0.5, 1.0
    got = simulate_iteration(chain(s, t_f, t_b), 1, schedule=schedule, redundant_of=_ring(s))
    assert got.iteration_s == pytest.approx(s * (t_f + t_b), abs=1e-12)
    assert got.redundant_s == pytest.approx((s - 1) * t_f, abs=1e-12)


@pytest.mark.parametrize("m", [4, 8, 16])
def test_redundant_forward_without_bubbles_costs_compute(m):
    # two stages, GPipe: node 0 must run m own forwards, m backwards and m redundant forwards of
    # stage 1; no schedule can finish before that work is done
    t_f, t_b = 1.0, 2.0
    plain = simulate_iteration(chain(2, t_f, t_b), m, schedule="gpipe").iteration_s
    got = simulate_iteration(chain(2, t_f, t_b), m, schedule="gpipe", redundant_of=_ring(2)).iteration_s
    assert got >= m * (2 * t_f + t_b) - 1e-12
    assert got > plain
    doubled = simulate_iteration(chain(2, t_f, t_b), m, schedule="gpipe", forward_multiplier=lambda s: 2.0)
    assert got <= doubled.iteration_s + t_f + 1e-12  # low priority never costs more than one op's wait


def test_redundant_stash_and_memory_spill():
    # activations to host memory run off the compute; memory over the node's budget is swapped out
    # and back at the start of the iteration, shifting the whole one-micro-batch pipeline by it
    s, t_f, t_b = 3, 0.5, 1.0
    base = dict(stage_forward_s=(t_f,) * s, stage_backward_s=(t_b,) * s, activation_bytes=1000,
                stage_gradient_bytes=(100,) * s, default_link=LinkSpec(0.0, math.inf), storage_bytes_per_s=1e9,
                restart_delay_s=0.0, head_on_stage0=False, host_bytes_per_s=1000.0)
    free = simulate_iteration(Cluster(name="m", **base), 1, schedule="gpipe", redundant_of=_ring(s))
    assert free.peak_node_bytes == 2 * 3 * 100  # own stage + replica, parameters and Adam (3x)
    # the last stash (1000 B at 1000 B/s = 1 s) starts when the second-to-last redundant forward ends
    assert free.iteration_s == pytest.approx(s * (t_f + t_b), abs=1e-12)
    tight = simulate_iteration(Cluster(name="m", node_memory_bytes=500, **base), 1, schedule="gpipe",
                               redundant_of=_ring(s))
    assert tight.iteration_s == pytest.approx(free.iteration_s + 2 * 100 / 1000.0, abs=1e-12)
    with pytest.raises(SimulationError, match=r"redundant_forward_of\(1\) = 7 is not a stage"):
        simulate_iteration(Cluster(name="m", **base), 1, redundant_of=lambda st: 7 if st == 1 else None)
