"""Real processes on localhost: one per stage, SIGKILL failures, recovery by real transfers.

One pipeline (5 processes: the embedding stage and 4 transformer stages of the tiny model, plus a
warm spare) serves every test of this module; each test starts over with `reset()`. Expected
values come from the in-process trainer and strategies on the same failures: the real run must
compute the same losses, gradient norms and final states, bit for bit.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from simulator.cluster import Cluster, LinkSpec
from simulator.real import RealRunSpec, run_real
from simulator.run import run_one
from trainer.api import TrainerConfig
from trainer.distributed import DistributedPipeline
from trainer.pipeline import PipelineTrainer
from trainer.strategies import STRATEGIES, make_planned_strategy, make_strategy
from trainer.strategies.plan import plan_actions

SCRIPT = {  # boundary -> (stages, where): failures of the test script
    2: ((2,), "boundary"),
    4: ((2, 3), "mid"),  # adjacent stages, inside the iteration
    5: ((0,), "mid"),  # the embedding stage, inside the iteration
    6: ((1, 4), "boundary"),  # both outer transformer stages
}
ITERATIONS = 8


@pytest.fixture(scope="module")
def pipe(tiny, cache, module_dir):
    with DistributedPipeline(TrainerConfig(**tiny), module_dir / "run", cache_dir=cache, spares=2,
                             timeout_s=60.0) as p:
        yield p


def _in_process_state(trainer, stage) -> np.ndarray:
    from trainer.distributed.stage_runtime import StageRuntime

    rt = StageRuntime(trainer.config, stage, initial=False, cache_dir=trainer.cache_dir)
    rt.module.load_state_dict(trainer.stage_weights(stage))
    rt.optimizer.load_state_dict(trainer.optimizer(stage).state_dict())
    rt.lr_scale = trainer.lr_scale(stage)
    return rt.pack("full").numpy()


def test_failure_free_run_is_the_in_process_trainer(pipe, tiny, cache, tmp_path):
    pipe.reset()
    ref = PipelineTrainer(TrainerConfig(**tiny), cache_dir=cache)
    for _ in range(3):
        out, expected = pipe.train_step(), ref.train_step()
        assert out.committed and out.result == expected
    assert pipe.evaluate(2) == ref.evaluate(2)
    for stage in range(5):
        pipe.save_state(stage, tmp_path / f"s{stage}.npy")
        assert np.array_equal(np.load(tmp_path / f"s{stage}.npy"), _in_process_state(ref, stage)), stage
    assert len(set(pipe.pids().values())) == 5  # one OS process per stage


@pytest.mark.parametrize("name", sorted(STRATEGIES))
def test_every_strategy_recovers_killed_processes_as_in_process(pipe, tiny, cache, tmp_path, name):
    """Boundary and mid-iteration SIGKILLs, adjacent and outer stages and stage 0: same as in-process."""
    pipe.reset()
    ref = PipelineTrainer(TrainerConfig(**tiny), cache_dir=cache)
    original = make_strategy(name)
    original.attach(ref)
    planned = make_planned_strategy(name)
    planned.bind(pipe)
    pipe.run_plan(planned.plan_attach())
    swap = planned.swap_on_odd_microbatches()
    redundant = planned.forward_multiplier(1) > 1 or planned.redundant_forward_of(1) is not None  # as run_real
    killed = 0
    for boundary in range(ITERATIONS):
        if boundary in SCRIPT and name != "no_failure":
            stages, where = SCRIPT[boundary]
            expected_actions = original.on_failure(list(stages), ref.iteration)
            lost = tuple(s for s in stages if s not in planned.immune_stages())
            if lost:
                old = {s: pipe.pids()[s] for s in lost}
                if where == "mid":
                    aborted = pipe.train_step(swap_odd=swap, redundant=redundant, kill_after_s=0.005,
                                              kill_stages=lost)
                    assert not aborted.committed and aborted.lost == lost
                else:
                    pipe.kill(lost)
                pipe.replace(lost)
                assert all(pipe.pids()[s] != old[s] for s in lost)  # new processes
                planned.note_lost(lost)
                steps = planned.plan_recovery(lost, pipe.iteration)
                pipe.run_plan(steps)
                assert plan_actions(steps, pipe) == expected_actions
                killed += len(lost)
            else:
                assert expected_actions == []
        out, expected = pipe.train_step(swap_odd=swap, redundant=redundant), ref.train_step()
        assert out.committed and out.result == expected, boundary
        assert pipe.iteration == ref.iteration
        pipe.run_plan(planned.plan_iteration_end(pipe.iteration, out.result))
        original.on_iteration_end(ref.iteration, expected)
    assert pipe.evaluate(2) == ref.evaluate(2)
    for stage in range(5):
        pipe.save_state(stage, tmp_path / f"s{stage}.npy")
        assert np.array_equal(np.load(tmp_path / f"s{stage}.npy"), _in_process_state(ref, stage)), stage
    assert killed >= (0 if name == "no_failure" else 3)


def test_real_run_loop_logs_each_iteration_once_and_matches_the_simulated_run(pipe, tiny, cache, tmp_path):
    spec = RealRunSpec(strategy="checkfree_plus", failure_rate=0.06, seed=0, iterations=10,
                       trainer_config=tiny, eval_every=5, eval_batches=2, mid_iteration=True, failable_embedding=True,
                       cache_dir=str(cache))
    log = tmp_path / "real.jsonl"
    real = run_real(spec, tmp_path / "unused", log_path=log, pipeline=pipe)
    n = 5
    cluster = Cluster(name="t", stage_forward_s=(0.01,) * n, stage_backward_s=(0.02,) * n, activation_bytes=4,
                      stage_gradient_bytes=(4,) * n, default_link=LinkSpec(0.0, 1e9), storage_bytes_per_s=1e9,
                      restart_delay_s=0.1)
    sim = run_one(spec.simulated(cluster))
    assert real["failures"] > 0 and real["failures"] == sim["failures"]
    assert [r["step"] for r in real["rows"]] == list(range(len(real["rows"])))  # every step once, in order
    import json

    logged = [json.loads(line) for line in log.read_text().splitlines()]
    assert [r["step"] for r in logged] == [r["step"] for r in real["rows"]]
    assert [r["train_loss"] for r in real["rows"]] == [r["train_loss"] for r in sim["rows"]]
    assert [r["val_loss"] for r in real["rows"]] == [r["val_loss"] for r in sim["rows"]]
    assert [r["failures"] for r in real["rows"]] == [r["failures"] for r in sim["rows"]]
    lost_work = [e for r in real["rows"] for e in r["events"] if e["action"] == "LostWork"]
    assert lost_work and all(e["seconds"] > 0 for e in lost_work)
    assert set(real["host"]["share_before"]) == set(range(1, n + 1))


def test_bulk_failures_from_a_trace_kill_several_processes_at_one_boundary(pipe, tiny, cache, tmp_path):
    import json

    trace = tmp_path / "trace.json"
    trace.write_text(json.dumps([{"time_s": 0.0, "stage": 2}, {"time_s": 0.0, "stage": 3},
                                 {"time_s": 0.0, "stage": 4}, {"time_s": 0.3, "stage": 1}]))
    spec = RealRunSpec(strategy="neighbour_copy", failure_rate=0.0, seed=0, iterations=6, trainer_config=tiny,
                       eval_every=3, eval_batches=2, failure_model="trace", trace=str(trace), cache_dir=str(cache))
    rec = run_real(spec, tmp_path / "unused", pipeline=pipe)
    first = next(r for r in rec["rows"] if r["failures"])
    assert first["failures"] == [2, 3, 4] and first["iteration"] == 1
    assert rec["failures"] >= 3 and rec["iterations_done"] == 6
    assert all(np.isfinite(r["train_loss"]) for r in rec["rows"][1:])


def _bamboo_p3():
    """The shared Bamboo EC2 trace (../shared/data/traces, not part of the product), or None."""
    from pathlib import Path

    for parent in Path(__file__).resolve().parents:
        path = parent / "shared" / "data" / "traces" / "bamboo" / "p3-trace.csv"
        if path.exists():
            return path
    return None


@pytest.mark.slow
@pytest.mark.skipif(_bamboo_p3() is None, reason="shared Bamboo traces not present")
def test_bamboo_spot_trace_bulk_preemptions_kill_processes_together(pipe, tiny, cache, tmp_path):
    """Same-minute removals of the real EC2 trace become several SIGKILLs at one boundary."""
    spec = RealRunSpec(strategy="gemini", failure_rate=0.0, seed=0, iterations=100, trainer_config=tiny,
                       eval_every=50, eval_batches=2, failure_model="bamboo", trace=str(_bamboo_p3()),
                       trace_time_scale=0.0005, cache_dir=str(cache), strategy_knobs={"gemini": {"interval": 5}})
    rec = run_real(spec, tmp_path / "unused", pipeline=pipe)
    bulk = [r for r in rec["rows"] if len(r["failures"]) >= 2]
    assert bulk, "no boundary with several stages killed"
    assert rec["iterations_done"] == 100 and rec["steps"] > 100  # gemini rolled back and re-ran iterations
    assert all(np.isfinite(r["train_loss"]) for r in rec["rows"][1:])
