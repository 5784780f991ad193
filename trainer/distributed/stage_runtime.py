"""One stage's training state inside its own process: module, Adam, LR scale, the copies it holds.

Built the way `PipelineTrainer` builds a stage (same modules, same per-stage generators, same
per-stage clipping and Adam), so a failure-free real run computes the same losses as the
in-process trainer (tests/distributed). A replacement process starts *empty*: NaN weights and no
Adam state, like `PipelineTrainer.lose_stage`, so a recovery that forgot to fill something in
shows up as NaN instead of silently reusing a seed.

State travels as one flat float32 vector (`pack`), in parameter order:

    weights: [W_1 ... W_n | lr]
    full:    [W_1 ... W_n | m_1 ... m_n | v_1 ... v_n | step_1 ... step_n | lr]

(m, v: Adam's exp_avg and exp_avg_sq; step: its per-tensor step count, 0 = no state yet; lr: the
LR scale as the two float32 words of its float64 bits, `LR_WORDS`, so an exact copy keeps it exact).
A recovery that combines several vectors (`trainer.strategies.plan.combine`) combines all but the
LR words element by element, so it computes exactly what the in-process executor computes tensor
by tensor.
Checkpoints are these vectors in `.npy` files, written to a temporary name, fsynced and renamed.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from trainer.api import TrainerConfig
from trainer.data import TokenSampler, load_tokens, validation_windows
from trainer.model import EmbeddingStage, TransformerStage, init_embedding_stage, init_transformer_stage
from trainer.pipeline import ADAM_BETAS, ADAM_EPS, CLIP_EPS, stage_generator

__all__ = ["StageRuntime", "stage_module", "flat_numel", "LR_WORDS", "lr_words", "lr_of"]

LR_WORDS = 2  # the LR scale travels as its float64 bits in two float32 slots


def lr_words(lr_scale: float) -> torch.Tensor:
    """The float64 `lr_scale` as two float32 words (bit copy)."""
    return torch.tensor([float(lr_scale)], dtype=torch.float64).view(torch.float32)


def lr_of(flat: torch.Tensor) -> float:
    """The LR scale stored in the last two words of a packed state."""
    return float(flat[-LR_WORDS:].clone().view(torch.float64).item())


def stage_module(config: TrainerConfig, stage: int) -> nn.Module:
    """An uninitialised module of `stage`'s kind (EmbeddingStage for 0, TransformerStage otherwise)."""
    return EmbeddingStage(config) if stage == 0 else TransformerStage(config)


def flat_numel(module: nn.Module, parts: str) -> int:
    """Length of `module`'s packed state (module docstring)."""
    params = list(module.parameters())
    n = sum(p.numel() for p in params)
    return n + LR_WORDS if parts == "weights" else 3 * n + len(params) + LR_WORDS


class StageRuntime:
    """Module, optimizer, LR scale and held copies of one stage (module docstring)."""

    def __init__(self, config: TrainerConfig, stage: int, *, initial: bool, cache_dir: Path):
        self.config, self.stage = config, stage
        self.module = stage_module(config, stage)
        self.params = list(self.module.parameters())
        self.lr_scale = 1.0
        self.copies: dict[int, tuple[str, torch.Tensor]] = {}  # stage -> (parts, packed state)
        self._templates: dict[int, nn.Module] = {}
        self._replica_module: tuple[int, nn.Module] | None = None  # for the redundant forward
        if initial:
            self.reinit(0, 1.0)
        else:
            self.lose()
        self.sampler = self.val = None
        if stage == 0:  # the embedding stage owns the data (its position comes from the driver)
            split = load_tokens(config.data, config.vocab_size, config.context, cache_dir)
            self.sampler = TokenSampler(split.train, config.context, config.seed)
            self.val = split.val

    # ------------------------------------------------------------------ state
    def _new_optimizer(self) -> None:
        self.optimizer = torch.optim.Adam(self.params, lr=self.config.lr, betas=ADAM_BETAS, eps=ADAM_EPS,
                                          weight_decay=0.0)

    @torch.no_grad()
    def lose(self) -> None:
        """NaN weights, no gradients, no Adam state (a replacement node's memory holds nothing)."""
        for p in self.params:
            p.fill_(float("nan"))
            p.grad = None
        self.lr_scale = 1.0
        self._new_optimizer()

    def reinit(self, salt: int, lr_scale: float) -> None:
        """The model's init from `stage_generator(seed, stage, salt)` and a fresh Adam."""
        gen = stage_generator(self.config.seed, self.stage, salt)
        if self.stage == 0:
            init_embedding_stage(self.module, gen)
        else:
            init_transformer_stage(self.module, self.config, gen)
        self.lr_scale = float(lr_scale)
        self._new_optimizer()

    @torch.no_grad()
    def pack(self, parts: str) -> torch.Tensor:
        """This stage's state as one flat vector (module docstring)."""
        chunks = [p.detach().reshape(-1) for p in self.params]
        if parts == "full":
            zeros = [torch.zeros(p.numel()) for p in self.params]
            state = [self.optimizer.state.get(p, {}) for p in self.params]
            chunks += [s["exp_avg"].reshape(-1) if s else z for s, z in zip(state, zeros)]
            chunks += [s["exp_avg_sq"].reshape(-1) if s else z for s, z in zip(state, zeros)]
            chunks.append(torch.tensor([float(s["step"]) if s else 0.0 for s in state]))
        chunks.append(lr_words(self.lr_scale))
        return torch.cat([c.to(torch.float32) if c.dtype != torch.float32 else c for c in chunks])

    @torch.no_grad()
    def unpack(self, flat: torch.Tensor, parts: str, optimizer: str, lr_scale: float | None) -> None:
        """Load a packed state: weights always; Adam from the vector ("moved") or fresh.

        `lr_scale=None` takes the vector's own (exact copies).
        """
        offset = 0
        for p in self.params:
            p.copy_(flat[offset:offset + p.numel()].view_as(p))
            offset += p.numel()
        self.lr_scale = lr_of(flat) if lr_scale is None else float(lr_scale)
        self._new_optimizer()
        if optimizer == "fresh":
            return
        n = offset
        steps = flat[3 * n:3 * n + len(self.params)]
        state = {}
        for idx, p in enumerate(self.params):
            step = float(torch.round(steps[idx]))
            if step == 0.0:
                continue  # never stepped: a fresh Adam, as the in-process executor leaves it
            lo = sum(q.numel() for q in self.params[:idx])
            state[idx] = {"step": torch.tensor(step),
                          "exp_avg": flat[n + lo:n + lo + p.numel()].view_as(p).clone(),
                          "exp_avg_sq": flat[2 * n + lo:2 * n + lo + p.numel()].view_as(p).clone()}
        template = self.optimizer.state_dict()
        self.optimizer.load_state_dict({"state": state, "param_groups": template["param_groups"]})

    def template(self, stage: int) -> nn.Module:
        """A module of `stage`'s kind, for sizes and for the redundant forward (not trained)."""
        if stage not in self._templates:
            self._templates[stage] = stage_module(self.config, stage)
        return self._templates[stage]

    def numel(self, stage: int, parts: str) -> int:
        """Length of `stage`'s packed state."""
        return flat_numel(self.module if stage == self.stage else self.template(stage), parts)

    def hold(self, stage: int, parts: str, flat: torch.Tensor) -> None:
        """Keep a copy of `stage`'s packed state (replaces the previous one)."""
        self.copies[stage] = (parts, flat.clone())
        if self._replica_module is not None and self._replica_module[0] == stage:
            self._replica_module = None

    def copy_of(self, stage: int, parts: str) -> torch.Tensor:
        """The held copy of `stage`, restricted to `parts`; KeyError when none is held."""
        held_parts, flat = self.copies[stage]
        if parts == held_parts:
            return flat
        if parts == "weights" and held_parts == "full":
            n = self.numel(stage, "weights") - LR_WORDS
            return torch.cat([flat[:n], flat[-LR_WORDS:]])
        raise KeyError(f"copy of stage {stage} holds only {held_parts}")

    # ------------------------------------------------------------------ compute
    def forward(self, h: torch.Tensor) -> torch.Tensor:
        """Transformer stage: (B, T, C) -> (B, T, C)."""
        return self.module(h)

    def replica_forward(self, stage: int, h: torch.Tensor) -> None:
        """Bamboo's redundant forward: the held copy of `stage` run on `h` (B, T, C), result dropped."""
        if stage not in self.copies:
            return  # a replacement holds no copy until the next refresh
        if self._replica_module is None or self._replica_module[0] != stage:
            module = stage_module(self.config, stage)
            flat = self.copy_of(stage, "weights")
            with torch.no_grad():
                offset = 0
                for p in module.parameters():
                    p.copy_(flat[offset:offset + p.numel()].view_as(p))
                    offset += p.numel()
            self._replica_module = (stage, module)
        module = self._replica_module[1]
        with torch.no_grad():
            module.logits(h) if stage == 0 else module(h)

    def loss_sum(self, h: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        """Embedding stage's head: summed cross-entropy (nats) of logits (B, T, V) against y (B, T)."""
        logits = self.module.logits(h)
        return F.cross_entropy(logits.flatten(0, 1), y.flatten(), reduction="sum")

    def clip(self) -> float:
        """Clip this stage's gradient to `grad_clip` (torch's rule); the norm after clipping."""
        grads = [p for p in self.params if p.grad is not None]
        if not grads:
            return 0.0
        norm = torch.nn.utils.clip_grad_norm_(grads, self.config.grad_clip)
        coef = torch.clamp(self.config.grad_clip / (norm + CLIP_EPS), max=1.0)
        return float(norm * coef)

    def step(self, base_lr: float) -> None:
        """One Adam step at the scheduled LR times this stage's LR scale; gradients cleared."""
        for group in self.optimizer.param_groups:
            group["lr"] = base_lr * self.lr_scale
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)

    def zero_grad(self) -> None:
        self.optimizer.zero_grad(set_to_none=True)

    # ------------------------------------------------------------------ data (stage 0)
    def draw_batches(self, sampler_state: dict, n: int) -> tuple[list, dict]:
        """`n` micro-batches (x, y): (B, T) from the driver's data position; returns the new position."""
        self.sampler.set_state(sampler_state)
        batches = [self.sampler.next_batch(self.config.micro_batch_size) for _ in range(n)]
        return batches, self.sampler.state()

    def validation(self, n_batches: int) -> list:
        """The first `n_batches` fixed validation micro-batches (x, y): (B, T), as PipelineTrainer.evaluate."""
        b = self.config.micro_batch_size
        xs, ys = validation_windows(self.val, self.config.context, n_batches * b)
        return [(xs[i * b:(i + 1) * b], ys[i * b:(i + 1) * b]) for i in range(n_batches)]

    # ------------------------------------------------------------------ storage
    def save(self, path: Path) -> int:
        """Write the full packed state atomically; returns the bytes written."""
        flat = self.pack("full").numpy()
        tmp = path.with_name(path.name + ".tmp")
        with open(tmp, "wb") as f:
            np.save(f, flat, allow_pickle=False)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
        return flat.nbytes

    def load(self, path: Path) -> int:
        """Load the full packed state written by `save`; returns the bytes read."""
        flat = np.load(path, allow_pickle=False)
        self.unpack(torch.from_numpy(flat), "full", "moved", None)
        return flat.nbytes
