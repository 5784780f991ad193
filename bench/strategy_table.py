"""The strategy table of issue 16: every strategy, the same failure draws, paired ratios with 95 % CIs.

    python bench/strategy_table.py --out results/strategies [--preset quick] [--rates 0.01 0.03]
                                   [--seeds 0 1 2 3 4] [--mid-iteration] [--failable-embedding] [--jobs 2]

Runs a simulator sweep (simulator.sweep: resumable, one JSON line per run) of the paper's strategies
and ours on one preset and prints, per failure rate, the time to the target loss of each strategy
(mean over seeds) and, for each of ours, the paired ratio to each paper strategy: per seed
t_ours / t_paper (every strategy meets the same failure draws for a seed, docs/simulator.md
section 3), then the mean ratio and its 95 % percentile-bootstrap interval over seeds (10,000
resamples, seeded). A strategy "beats" a paper strategy at a rate when the whole interval is below 1.
The table goes to OUT/table.md as well. Runs stop at the target (`RunSpec.stop_at_target`: the time to
target is that of the full run, the runs being deterministic); "failures acted on" counts the
failures until then.

`adaptive` needs seconds (trainer/strategies/adaptive.py): its `copy_s` is the cluster's price of
one refresh of every copy (one Transfer of parameter + Adam bytes per stage and holder, one after
another) and `iteration_s` the simulated iteration, both from the sweep's cluster.

    --cluster FILE            run on this cluster (e.g. the local-real calibration) instead of `local`
    --reprice-on FILE         the table of the finished sweep in OUT priced on another cluster
                              (simulator/reprice.py: exact for every strategy but `adaptive`, whose
                              rows then come from --adaptive-from DIR, a sweep run on that cluster)
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

PAPER = ("checkfree", "checkfree_plus", "checkpoint", "redundant")
OURS = ("checkfree_adam", "neighbour_copy", "gemini", "adaptive")
RESAMPLES = 10_000


def paired_ratio_ci(ours: list[float], theirs: list[float], seed: int = 0) -> tuple[float, float, float]:
    """Mean of per-seed ratios ours/theirs and its 95 % percentile-bootstrap interval over seeds."""
    ratios = np.array(ours) / np.array(theirs)
    if not np.all(np.isfinite(ratios)):
        return math.nan, math.nan, math.nan
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, len(ratios), size=(RESAMPLES, len(ratios)))
    means = ratios[idx].mean(axis=1)
    return float(ratios.mean()), float(np.percentile(means, 2.5)), float(np.percentile(means, 97.5))


def _cluster_and_knobs(args, preset, out: Path):
    from simulator.cluster import Cluster
    from simulator.cost import price
    from simulator.model_size import trained_model_size
    from simulator.presets import local_cluster, paper_geo_cluster
    from simulator.schedule import simulate_iteration
    from simulator.sweep import _init_worker
    from trainer import PipelineTrainer
    from trainer.api import TrainerConfig
    from trainer.strategies.base import Transfer
    from trainer.strategies.planned import ring_neighbours

    _init_worker()
    cfg = dict(preset.trainer_config, seed=0)
    trainer = PipelineTrainer(TrainerConfig(**cfg))
    path = out / "cluster.json"
    if path.exists():
        cluster = Cluster.from_dict(json.loads(path.read_text()))
    elif args.cluster:
        cluster = Cluster.from_dict(json.loads(Path(args.cluster).read_text()))
        out.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(cluster.to_dict(), indent=1, sort_keys=True) + "\n")
    else:
        cluster = paper_geo_cluster() if preset.cluster == "paper-geo" else \
            local_cluster(trainer, 5, n_micro_batches=cfg.get("n_micro_batches", 4))
        out.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(cluster.to_dict(), indent=1, sort_keys=True) + "\n")
    n = trainer.n_stages
    full = [trainer.stage_param_bytes(s) + trainer.stage_optimizer_bytes(s) for s in range(n + 1)]
    # one refresh of every copy, priced as the run prices it (the modelled model's bytes, compressed time)
    copies = [Transfer(s, h, full[s], of_stages=(s,), optimizer=True) for s in range(n + 1) for h in ring_neighbours(s, n)]
    if cluster.model is None:  # the trained model's own bytes: the formula, link by link
        copy_s = sum(cluster.transfer_s(a.src_stage, a.dst_stage, a.nbytes) for a in copies) * preset.action_time_scale
    else:
        copy_s = price(cluster, copies, trained=trained_model_size(trainer)).seconds * preset.action_time_scale
    m = (cluster.model.micro_batches if cluster.model is not None else 0) or cfg.get("n_micro_batches", 4)
    iteration_s = simulate_iteration(cluster, m, schedule=preset.schedule).iteration_s
    knobs = dict(preset.strategy_knobs)
    knobs["adaptive"] = {"copy_s": copy_s, "iteration_s": iteration_s}
    runs = out / "runs.jsonl"
    if runs.exists() and runs.stat().st_size:  # a resumed table keeps the knobs it started with (seconds
        first = json.loads(runs.open().readline())  # measured then, like cluster.json)
        knobs["adaptive"] = first["spec"]["strategy_knobs"].get("adaptive", knobs["adaptive"])
    knobs.setdefault("gemini", {"interval": knobs.get("checkpoint", {}).get("interval", 10)})
    return cluster, knobs


def main(argv: list[str] | None = None) -> int:
    from dataclasses import replace

    from simulator.experiments import sweep_preset
    from simulator.run import RunSpec
    from simulator.sweep import SweepSpec, run_sweep

    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", required=True)
    p.add_argument("--preset", default="quick")
    p.add_argument("--rates", type=float, nargs="+", default=None)
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4])
    p.add_argument("--strategies", nargs="+", default=["no_failure", *PAPER, *OURS])
    p.add_argument("--mid-iteration", action="store_true")
    p.add_argument("--failable-embedding", action="store_true")
    p.add_argument("--jobs", type=int, default=2)
    p.add_argument("--cluster", default=None)
    p.add_argument("--reprice-on", default=None)
    p.add_argument("--adaptive-from", default=None)
    p.add_argument("--with-runs", nargs="*", default=[],
                   help="also table the runs.jsonl of these sweep directories (same preset and cluster, e.g. the "
                        "paper strategies of `shardproof simulate sweep`): paired with ours by seed")
    args = p.parse_args(argv)
    out = Path(args.out)
    preset = sweep_preset(args.preset)
    if args.reprice_on:
        return _reprice_table(args, preset, out)
    cluster, knobs = _cluster_and_knobs(args, preset, out)
    cfg = dict(preset.trainer_config)
    cfg.setdefault("total_iters", preset.iterations)
    base = RunSpec(strategy="no_failure", failure_rate=0.0, seed=0, iterations=preset.iterations, cluster=cluster,
                   trainer_config=cfg, strategy_knobs=knobs, eval_every=preset.eval_every,
                   eval_batches=preset.eval_batches, schedule=preset.schedule, target_loss=preset.target_loss,
                   max_steps_factor=preset.max_steps_factor, mid_iteration=args.mid_iteration,
                   failable_embedding=args.failable_embedding, stop_at_target=True,
                   redundant_overhead=preset.redundant_overhead, jump_eval_batches=preset.jump_eval_batches,
                   action_time_scale=preset.action_time_scale)
    rates = tuple(args.rates or preset.failure_rates)
    records = []
    for seed in args.seeds:  # seed by seed: a partial sweep already compares every strategy (paired by seed)
        sweep = SweepSpec(strategies=tuple(args.strategies), failure_rates=rates, seeds=(seed,), base=base)
        records = run_sweep(sweep, out, max_workers=args.jobs, progress=sys.stderr.isatty())
    records = _other_runs(args.with_runs, base) + records  # this sweep's own runs win on a shared key
    wanted = {(n, 0.0 if n == "no_failure" else float(r), s) for n in [*args.strategies, *PAPER, "no_failure"]
              for r in rates for s in args.seeds}
    records = [r for r in records if (r["key"]["strategy"], float(r["key"]["failure_rate"]), int(r["key"]["seed"]))
               in wanted]
    text = table(records, rates, args.seeds, preset.target_loss, args)
    (out / "table.md").write_text(text)
    print(text)
    return 0


def _other_runs(dirs, base) -> list:
    """Runs of other sweeps of the same cluster, target and trained model, not already in this one."""
    from simulator.sweep import read_results

    out = []
    for d in dirs:
        for rec in read_results(Path(d) / "runs.jsonl"):
            spec = rec["spec"]
            if (spec["cluster"], spec["target_loss"], spec["trainer_config"].get("d_model")) != (
                    base.cluster.name, base.target_loss, base.trainer_config.get("d_model")):
                raise SystemExit(f"{d}: a run of another preset or cluster ({spec['cluster']}, target "
                                 f"{spec['target_loss']}); pass sweeps of this one")
            out.append(rec)
    return out


def _reprice_table(args, preset, out: Path) -> int:
    from simulator.cluster import Cluster
    from simulator.reprice import reprice, schedule_hooks
    from simulator.sweep import read_results

    cluster = Cluster.from_dict(json.loads(Path(args.reprice_on).read_text()))
    records = []
    for rec in read_results(out / "runs.jsonl"):
        name = rec["key"]["strategy"]
        if name == "adaptive":
            continue
        hooks = schedule_hooks(name, rec["spec"].get("strategy_knobs", {}).get(name, {}), cluster.n_stages)
        priced = reprice(rec, cluster, **hooks, micro_batches=preset.trainer_config.get("n_micro_batches", 4),
                         schedule=preset.schedule)
        records.append({**rec, "time_to_target_s": priced["time_to_target_s"]})
    if args.adaptive_from:
        records += [r for r in read_results(Path(args.adaptive_from) / "runs.jsonl") if r["key"]["strategy"] == "adaptive"]
    rates = tuple(args.rates or preset.failure_rates)
    text = table(records, rates, args.seeds, preset.target_loss, args,
                 note=f"priced on {args.reprice_on} (simulator/reprice.py); adaptive run on it")
    (out / f"table-{Path(args.reprice_on).stem}.md").write_text(text)
    print(text)
    return 0


def table(records, rates, seeds, target, args, note: str = "") -> str:
    """Markdown: per rate, every strategy's mean time to target and the paired ratios with CIs."""
    by = {}
    for r in records:
        k = r["key"]
        t = r["time_to_target_s"]
        by[(k["strategy"], float(k["failure_rate"]), int(k["seed"]))] = (math.inf if t is None else t, r)
    lines = [f"Time to validation loss {target} (simulated s) on preset `{args.preset}`"
             f"{', mid-iteration failures' if args.mid_iteration else ''}"
             f"{', failable embedding stage' if args.failable_embedding else ''}; "
             f"paired ratios (per seed, same failure draws) with 95 % bootstrap CIs."
             f"{' ' + note if note else ''}", ""]

    def times(name, rate):
        r = 0.0 if name == "no_failure" else float(rate)
        return {s: by[(name, r, s)][0] for s in seeds if (name, r, s) in by}

    for rate in rates:
        lines += [f"### failure rate {rate:g} per stage per iteration", "",
                  "| strategy | seeds reached | mean s | vs no_failure | failures acted on | " +
                  " | ".join(f"vs {p}" for p in PAPER) + " | beats all four |",
                  "|---|---|---|---|---|" + "---|" * len(PAPER) + "---|"]
        nf = times("no_failure", rate)
        for name in [*PAPER, *OURS]:
            mine = times(name, rate)
            if not mine:
                continue
            finite = [t for t in mine.values() if math.isfinite(t)]
            mean = sum(mine.values()) / len(mine)
            acted = sum(sum(1 for row in by[(name, float(rate), s)][1]["rows"] for e in row["strategy_events"]
                            if e["action"] == "Restart") for s in mine) / len(mine)

            def paired(other):
                common = sorted(set(mine) & set(other))
                return paired_ratio_ci([mine[s] for s in common], [other[s] for s in common]) if common else \
                    (math.nan,) * 3

            m, lo, hi = paired(nf)
            cells, beats = [], True
            for paper in PAPER:
                pm, plo, phi = paired(times(paper, rate))
                if name in PAPER:
                    cells.append("-" if name == paper else f"{pm:.3f}")
                else:
                    cells.append(f"{pm:.3f} [{plo:.3f}, {phi:.3f}]")
                    beats = beats and phi < 1.0
            verdict = "-" if name in PAPER else ("yes" if beats else "no")
            lines.append(f"| {name} | {len(finite)}/{len(mine)} | {mean:.2f} | {m:.3f} [{lo:.3f}, {hi:.3f}] | "
                         f"{acted:.1f} | " + " | ".join(cells) + f" | {verdict} |")
        lines.append("")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
