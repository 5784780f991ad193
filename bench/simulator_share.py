"""The simulator's share of a run's wall time (target <= 5 %).

End-to-end group (docs/STYLE.md rule 23): one real run of the ``quick`` preset's model on the
``local`` cluster, in this process with one torch thread (as a sweep worker runs). The
simulator's own work is timed inside `simulator.run.run_one` (``simulator_s``: pipeline
schedule simulation, failure draws, action pricing, clock bookkeeping); the rest is the real
trainer (train steps, evaluations, model construction).

    python bench/simulator_share.py [--strategy checkfree_plus] [--rate 0.02] [--iterations 150]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("OMP_NUM_THREADS", "1")


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--strategy", default="checkfree_plus")
    p.add_argument("--rate", type=float, default=0.02)
    p.add_argument("--iterations", type=int, default=150)
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args()

    import torch

    torch.set_num_threads(1)
    from simulator.experiments import sweep_preset
    from simulator.presets import local_cluster
    from simulator.run import RunSpec, load_backend, run_one

    preset = sweep_preset("quick")
    cfg = dict(preset.trainer_config, total_iters=args.iterations)
    t0 = time.perf_counter()
    cluster = local_cluster(load_backend(None).make_trainer(dict(cfg, seed=0)), 5)
    measure_s = time.perf_counter() - t0
    spec = RunSpec(strategy=args.strategy, failure_rate=args.rate, seed=args.seed, iterations=args.iterations,
                   cluster=cluster, trainer_config=cfg, strategy_knobs=preset.strategy_knobs,
                   eval_every=preset.eval_every, eval_batches=preset.eval_batches, target_loss=preset.target_loss)
    rec = run_one(spec)
    share = rec["simulator_s"] / rec["wall_s"]
    print(f"run: {args.strategy} rate={args.rate} seed={args.seed} iterations={args.iterations} "
          f"steps={rec['steps']} failures={rec['failures']} (torch {torch.__version__}, 1 thread)")
    print(f"cluster measurement (once per sweep, not per run): {measure_s:.2f} s")
    print(f"run wall time: {rec['wall_s']:.2f} s; simulator: {rec['simulator_s']:.4f} s; "
          f"share {100 * share:.3f} % (target <= 5 %) -> {'OK' if share <= 0.05 else 'OVER'}")
    return 0 if share <= 0.05 else 1


if __name__ == "__main__":
    sys.exit(main())
