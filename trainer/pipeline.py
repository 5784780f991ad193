"""PipelineTrainer: a real torch pipeline of CheckFree stages, trained with micro-batches.

One iteration (`train_step`) reads like nanoGPT's train.py loop:

    zero grads; for each of M micro-batches: forward through the stages in the schedule's order,
    loss scaled for accumulation, backward stage by stage; clip each stage's gradient to norm 1.0;
    one Adam step per stage.

Stage hops are real: each stage's input is a detached leaf `h.detach().requires_grad_()`, and the
backward runs stage by stage, handing the gradient of a stage's input to its predecessor, exactly
as pipeline-parallel runtimes (GPipe, Megatron) do between ranks. So per-stage timings and the
activation size that crosses each link are measurable, and a stage's gradient sees nothing but
its own parameters (per-stage clipping, CheckFree section 4 / published code).

Stage 0 is the CheckFree embedding stage (embedding + final norm + head); stages 1..S hold L
decoder blocks each. A recovery strategy repairs stages through the `stage_*`, `lose_stage`,
`reset_optimizer` and `reinit_stage` methods; `trainer.strategies` documents who calls what.

Randomness: parameter init uses one `torch.Generator` per stage seeded from (seed, stage); the
data sampler owns a `numpy.random.Generator` seeded from seed. Nothing here calls
`torch.manual_seed` or touches a global RNG, so two trainers with the same config compute
bit-identical losses, and the simulator's own RNG streams are left alone.
"""

from __future__ import annotations

import copy
import statistics
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from trainer.api import StepResult, TrainerConfig
from trainer.data import TokenSampler, default_cache_dir, load_tokens, validation_windows
from trainer.errors import TrainerError
from trainer.model import (
    EmbeddingStage,
    TransformerStage,
    init_embedding_stage,
    init_transformer_stage,
    stage_forward_flops,
)
from trainer.schedule import learning_rate

__all__ = ["PipelineTrainer", "StageState", "TrainerSnapshot", "ADAM_BETAS", "ADAM_EPS", "FP32_BYTES",
           "stage_generator"]

ADAM_BETAS = (0.9, 0.999)  # torch defaults; CheckFree published code `make_optim` uses the same
ADAM_EPS = 1e-8
FP32_BYTES = 4
CLIP_EPS = 1e-6  # torch.nn.utils.clip_grad_norm_: coef = max_norm / (norm + 1e-6), clamped to 1


def stage_generator(seed: int, stage: int, salt: int) -> torch.Generator:
    """The torch.Generator that initialises `stage` (salt 0 at start, k for the k-th re-initialisation).

    Seeded from SeedSequence([seed, stage, salt]), so a stage's initial weights depend only on
    these three integers: the real multi-process run (trainer/distributed) builds the same weights
    in each stage's own process.
    """
    value = int(np.random.SeedSequence([seed, stage, salt]).generate_state(1, np.uint64)[0])
    return torch.Generator().manual_seed(value & ((1 << 63) - 1))


@dataclass(frozen=True)
class StageState:
    """A stage's full training state: weights (cloned tensors), Adam state_dict (deep copy), LR scale."""

    weights: dict[str, torch.Tensor]
    optimizer: dict[str, Any]
    lr_scale: float


@dataclass(frozen=True)
class TrainerSnapshot:
    """Everything `restore` needs to continue bit-identically: stages, data position, counters."""

    iteration: int
    stages: tuple[StageState, ...]
    sampler_state: dict[str, Any]
    reinit_count: int
    last_grad_norms: tuple[float, ...] | None


class PipelineTrainer:
    """Real torch training of a Llama-style model split into S + 1 CheckFree stages.

    Interface fixed by docs/harness-contract.md. `iteration` counts completed `train_step`s.
    """

    def __init__(self, config: TrainerConfig, cache_dir: Path | None = None):
        if not isinstance(config, TrainerConfig):
            raise TrainerError(f"PipelineTrainer needs a TrainerConfig, got {type(config).__name__}")
        self.config = config
        self.n_stages = config.n_stages
        self.cache_dir = default_cache_dir(cache_dir)
        split = load_tokens(config.data, config.vocab_size, config.context, self.cache_dir)
        self._val_tokens = split.val
        self.corpus_sha256 = split.corpus_sha256
        self.train_tokens = len(split.train)
        self._sampler = TokenSampler(split.train, config.context, config.seed)
        self._stages: list[nn.Module] = [EmbeddingStage(config)]
        self._stages += [TransformerStage(config) for _ in range(config.n_stages)]
        for stage in range(config.n_stages + 1):
            self._init_stage(stage, salt=0)
        self.iteration = 0
        self._lr_scales = [1.0] * (config.n_stages + 1)
        self._optimizers = [self._make_optimizer(s) for s in range(config.n_stages + 1)]
        self.swap_odd_micro_batches = False  # CheckFree+ schedule, set by the strategy's attach()
        self.last_grad_norms: tuple[float, ...] | None = None
        self._reinit_count = 0

    # ------------------------------------------------------------------ construction helpers
    def _generator(self, stage: int, salt: int) -> torch.Generator:
        return stage_generator(self.config.seed, stage, salt)

    def _init_stage(self, stage: int, salt: int) -> None:
        module, gen = self._stages[stage], self._generator(stage, salt)
        if stage == 0:
            init_embedding_stage(module, gen)
        else:
            init_transformer_stage(module, self.config, gen)

    def _make_optimizer(self, stage: int) -> torch.optim.Adam:
        lr = learning_rate(self.config, self.iteration)
        return torch.optim.Adam(self._stages[stage].parameters(), lr=lr * self._lr_scales[stage],
                                betas=ADAM_BETAS, eps=ADAM_EPS, weight_decay=0.0)

    def _check_stage(self, stage: int) -> None:
        if not isinstance(stage, int) or not 0 <= stage <= self.n_stages:
            raise TrainerError(f"stage {stage!r} out of range 0..{self.n_stages}")

    # ------------------------------------------------------------------ schedule
    def stage_order(self, micro_batch: int) -> tuple[int, ...]:
        """Transformer stages in forward order for 0-based `micro_batch` (embedding stage excluded).

        Normally 1..S. With `swap_odd_micro_batches` (CheckFree+, arXiv 2506.15461 section 4.2),
        odd micro-batches swap the positions of stages 1<->2 and then S-1<->S: S = 2 gives (2, 1);
        S = 3 composes the two overlapping swaps into (2, 3, 1); S >= 4 gives (2, 1, 3, ..., S, S-1).
        """
        order = list(range(1, self.n_stages + 1))
        if self.swap_odd_micro_batches and micro_batch % 2 == 1:
            order[0], order[1] = order[1], order[0]
            if self.n_stages > 2:
                order[-2], order[-1] = order[-1], order[-2]
        return tuple(order)

    # ------------------------------------------------------------------ training
    def _forward_backward(self, x: torch.Tensor, y: torch.Tensor, order: Sequence[int], scale: float) -> float:
        """One micro-batch through the stages with real hops. x, y: (B, T). Returns the summed CE (nats)."""
        emb = self._stages[0]
        outputs, inputs = [], []
        out = emb.embed(x)  # (B, T, C)
        for stage in order:
            outputs.append(out)
            h = out.detach().requires_grad_()  # activation hop to `stage`
            inputs.append(h)
            out = self._stages[stage](h)
        outputs.append(out)
        h = out.detach().requires_grad_()  # hop back to the embedding stage's head
        inputs.append(h)
        logits = emb.logits(h)  # (B, T, V)
        loss_sum = F.cross_entropy(logits.flatten(0, 1), y.flatten(), reduction="sum")
        (loss_sum * scale).backward()
        for out, h in zip(reversed(outputs), reversed(inputs)):
            out.backward(h.grad)  # gradient hop to the predecessor
        return float(loss_sum.detach())

    def _clip(self, stage: int) -> float:
        """Clip the stage's gradient to L2 norm `grad_clip` (torch rule); return the norm after clipping."""
        grads = [p for p in self._stages[stage].parameters() if p.grad is not None]
        if not grads:
            return 0.0
        norm = torch.nn.utils.clip_grad_norm_(grads, self.config.grad_clip)
        coef = torch.clamp(self.config.grad_clip / (norm + CLIP_EPS), max=1.0)
        return float(norm * coef)

    def train_step(self) -> StepResult:
        """One real iteration: M micro-batches x (forward, backward), per-stage clip, per-stage Adam.

        Loss scaling: gradients of the M micro-batches *add up* in `.grad`, so each micro-batch's
        summed token loss is divided by the tokens of the whole iteration (M * B * T). The
        accumulated gradient is then the gradient of the token mean over the iteration, the same
        as one batch of M * B sequences (nanoGPT divides by gradient_accumulation_steps for the
        same reason; with equal-size micro-batches the two agree).
        """
        cfg = self.config
        lr = learning_rate(cfg, self.iteration)
        for stage, opt in enumerate(self._optimizers):
            for group in opt.param_groups:
                group["lr"] = lr * self._lr_scales[stage]
            opt.zero_grad(set_to_none=True)
        tokens = cfg.tokens_per_iteration
        loss_sum = 0.0
        for micro_batch in range(cfg.n_micro_batches):
            x, y = self._sampler.next_batch(cfg.micro_batch_size)  # (B, T) each
            loss_sum += self._forward_backward(x, y, self.stage_order(micro_batch), 1.0 / tokens)
        norms = tuple(self._clip(stage) for stage in range(self.n_stages + 1))
        for opt in self._optimizers:
            opt.step()
        self.iteration += 1
        self.last_grad_norms = norms
        return StepResult(loss=loss_sum / tokens, grad_norms=norms, tokens=tokens)

    @torch.no_grad()
    def evaluate(self, n_batches: int = 4) -> float:
        """Mean validation cross-entropy (nats/token) on the first n_batches * B fixed windows.

        Always the plain stage order 1..S (no CheckFree+ swap): it measures the model as deployed.
        """
        if n_batches < 1:
            raise TrainerError(f"evaluate needs n_batches >= 1, got {n_batches}")
        b = self.config.micro_batch_size
        xs, ys = validation_windows(self._val_tokens, self.config.context, n_batches * b)
        total = 0.0
        for i in range(n_batches):
            x, y = xs[i * b : (i + 1) * b], ys[i * b : (i + 1) * b]  # (B, T)
            h = self._stages[0].embed(x)
            for stage in range(1, self.n_stages + 1):
                h = self._stages[stage](h)
            logits = self._stages[0].logits(h)  # (B, T, V)
            total += float(F.cross_entropy(logits.flatten(0, 1), y.flatten(), reduction="sum"))
        return total / ys.numel()

    # ------------------------------------------------------------------ sizes and costs
    def stage_param_bytes(self, stage: int) -> int:
        """Bytes of the stage's parameters (fp32)."""
        self._check_stage(stage)
        return sum(p.numel() * p.element_size() for p in self._stages[stage].parameters())

    def stage_optimizer_bytes(self, stage: int) -> int:
        """Bytes of the stage's Adam state: exp_avg + exp_avg_sq (2 x params) + one fp32 step per tensor."""
        self._check_stage(stage)
        n_tensors = sum(1 for _ in self._stages[stage].parameters())
        return 2 * self.stage_param_bytes(stage) + FP32_BYTES * n_tensors

    def activation_bytes(self) -> int:
        """Bytes of one micro-batch activation hop between stages: B * T * C fp32."""
        cfg = self.config
        return cfg.micro_batch_size * cfg.context * cfg.d_model * FP32_BYTES

    def flops_per_stage(self) -> tuple[float, ...]:
        """Forward FLOPs per micro-batch for stages 0..S (see `trainer.model.stage_forward_flops`)."""
        return stage_forward_flops(self.config)

    def measure_stage_times(self, repeats: int = 3) -> tuple[tuple[float, float], ...]:
        """Measured (forward_s, backward_s) of one micro-batch per stage 0..S, median of `repeats`.

        Stage 0's times are embedding + head (with the loss). Uses a fixed validation batch and
        leaves weights, optimizer state, data position and gradients untouched (grads are cleared).
        """
        if repeats < 1:
            raise TrainerError(f"measure_stage_times needs repeats >= 1, got {repeats}")
        cfg, n = self.config, self.n_stages + 1
        x, y = validation_windows(self._val_tokens, cfg.context, cfg.micro_batch_size)
        fwd: list[list[float]] = [[] for _ in range(n)]
        bwd: list[list[float]] = [[] for _ in range(n)]
        clock = time.perf_counter
        for rep in range(repeats + 1):  # rep 0 warms up caches and allocator, not recorded
            t = [[0.0, 0.0] for _ in range(n)]
            t0 = clock()
            out0 = self._stages[0].embed(x)
            t[0][0] += clock() - t0
            outputs, inputs, out = [out0], [], out0
            for stage in range(1, n):
                h = out.detach().requires_grad_()
                inputs.append(h)
                t0 = clock()
                out = self._stages[stage](h)
                t[stage][0] += clock() - t0
                outputs.append(out)
            h = out.detach().requires_grad_()
            inputs.append(h)
            t0 = clock()
            loss = F.cross_entropy(self._stages[0].logits(h).flatten(0, 1), y.flatten())
            t[0][0] += clock() - t0
            t0 = clock()
            loss.backward()
            t[0][1] += clock() - t0
            for stage in range(n - 1, -1, -1):  # outputs[s] is stage s's output, inputs[s] its successor's input
                t0 = clock()
                outputs[stage].backward(inputs[stage].grad)
                t[stage][1] += clock() - t0
            if rep:
                for stage in range(n):
                    fwd[stage].append(t[stage][0])
                    bwd[stage].append(t[stage][1])
        for opt in self._optimizers:
            opt.zero_grad(set_to_none=True)
        return tuple((statistics.median(fwd[s]), statistics.median(bwd[s])) for s in range(n))

    # ------------------------------------------------------------------ state access for strategies
    @property
    def stages(self) -> tuple[nn.Module, ...]:
        """The stage modules 0..S (stage 0 = EmbeddingStage)."""
        return tuple(self._stages)

    def optimizer(self, stage: int) -> torch.optim.Adam:
        self._check_stage(stage)
        return self._optimizers[stage]

    def lr_scale(self, stage: int) -> float:
        """Multiplier on the scheduled LR for this stage (CheckFree sets 1.1 after a recovery)."""
        self._check_stage(stage)
        return self._lr_scales[stage]

    def stage_weights(self, stage: int) -> dict[str, torch.Tensor]:
        """Cloned weights of the stage, keyed by parameter name."""
        self._check_stage(stage)
        return {k: v.detach().clone() for k, v in self._stages[stage].state_dict().items()}

    def stage_state(self, stage: int) -> StageState:
        """Cloned weights, deep-copied Adam state and LR scale of the stage."""
        return StageState(weights=self.stage_weights(stage),
                          optimizer=copy.deepcopy(self._optimizers[stage].state_dict()),
                          lr_scale=self._lr_scales[stage])

    @torch.no_grad()
    def set_stage_weights(self, stage: int, weights: Mapping[str, torch.Tensor]) -> None:
        """Copy `weights` (same names and shapes as the stage's state_dict) into the stage in place."""
        self._check_stage(stage)
        try:
            self._stages[stage].load_state_dict(dict(weights), strict=True)
        except RuntimeError as exc:
            raise TrainerError(f"weights do not fit stage {stage}: {str(exc).splitlines()[0]}") from None

    def set_lr_scale(self, stage: int, lr_scale: float) -> None:
        """Change the stage's LR multiplier, keeping its Adam state (a decaying post-recovery bump)."""
        self._check_stage(stage)
        if not lr_scale > 0:
            raise TrainerError(f"lr_scale must be > 0, got {lr_scale!r}")
        self._lr_scales[stage] = float(lr_scale)

    @property
    def reinit_count(self) -> int:
        """Re-initialisations so far; the k-th uses salt k in `stage_generator`."""
        return self._reinit_count

    def data_state(self) -> dict[str, Any]:
        """A copy of the data position (the training sampler's generator state)."""
        return copy.deepcopy(self._sampler.state())

    def set_data_state(self, state: dict[str, Any], iteration: int) -> None:
        """Return the data position and the iteration counter to a `data_state()` taken earlier."""
        self._sampler.set_state(copy.deepcopy(state))
        self.iteration = int(iteration)

    def reset_optimizer(self, stage: int, lr_scale: float = 1.0) -> None:
        """Fresh Adam for the stage (moments zero, step 0) with LR = scheduled LR x lr_scale."""
        self._check_stage(stage)
        self._lr_scales[stage] = float(lr_scale)
        self._optimizers[stage] = self._make_optimizer(stage)

    def load_stage_state(self, stage: int, state: StageState) -> None:
        """Restore weights, Adam state and LR scale exactly (copies; `state` stays reusable)."""
        self.set_stage_weights(stage, state.weights)
        self.reset_optimizer(stage, state.lr_scale)
        self._optimizers[stage].load_state_dict(copy.deepcopy(state.optimizer))

    @torch.no_grad()
    def lose_stage(self, stage: int) -> None:
        """Simulate the loss of a stage's node: weights become NaN, gradients and Adam state vanish."""
        self._check_stage(stage)
        for p in self._stages[stage].parameters():
            p.fill_(float("nan"))
            p.grad = None
        self.reset_optimizer(stage, 1.0)

    def reinit_stage(self, stage: int, lr_scale: float = 1.0) -> None:
        """Fresh random weights (the model's init, new seed per call) and a fresh Adam for the stage."""
        self._check_stage(stage)
        self._reinit_count += 1
        self._init_stage(stage, salt=self._reinit_count)
        self.reset_optimizer(stage, lr_scale)

    # ------------------------------------------------------------------ snapshots
    def snapshot(self) -> TrainerSnapshot:
        """Full copy of weights, Adam states, LR scales, data position and counters."""
        return TrainerSnapshot(
            iteration=self.iteration,
            stages=tuple(self.stage_state(s) for s in range(self.n_stages + 1)),
            sampler_state=copy.deepcopy(self._sampler.state()),
            reinit_count=self._reinit_count,
            last_grad_norms=self.last_grad_norms,
        )

    def restore(self, snap: TrainerSnapshot) -> None:
        """Return to `snap` exactly; later train_steps reproduce the original run bit for bit."""
        if not isinstance(snap, TrainerSnapshot) or len(snap.stages) != self.n_stages + 1:
            raise TrainerError("restore needs a TrainerSnapshot of a trainer with the same stages")
        for stage, state in enumerate(snap.stages):
            self.load_stage_state(stage, state)
        self._sampler.set_state(copy.deepcopy(snap.sampler_state))
        self.iteration = snap.iteration
        self._reinit_count = snap.reinit_count
        self.last_grad_norms = snap.last_grad_norms
