"""The harness trainer's own plan (``trainer/pipeline.py``, ``docs/trainer.md``) as a DSL plan.

The trainer splits a Llama-style decoder CheckFree-style (arXiv 2506.15461, section 4):
**stage 0** (the embedding stage) holds the token embedding, the final RMSNorm and the untied
head and runs first (``embed``) and last (``logits``); **stages 1..S** hold
``n_layers / S`` decoder blocks each. One iteration (``PipelineTrainer.train_step``):

1. M micro-batches of B_mb sequences, each forward through stage 0, stages 1..S, stage 0's head;
   the cross-entropy *summed* over the micro-batch's tokens is multiplied by ``1 / (M B_mb T)``
   (the tokens of the whole iteration) before backward, so the accumulated ``.grad`` is the
   gradient of the token mean over the iteration;
2. each stage's gradient is clipped to L2 norm ``grad_clip`` = 1 with torch's
   ``clip_grad_norm_`` (coefficient ``min(1, 1 / (||g_s|| + 1e-6))``), **per stage**;
3. one ``torch.optim.Adam`` per stage: betas (0.9, 0.999), eps 1e-8, no weight decay (Adam
   with weight decay 0 is AdamW with weight decay 0), the same LR on every stage.

**Per-stage clipping is the trainer's stated semantics** (``trainer/api.py``: ``grad_clip``,
"per-stage clipping (CheckFree section 4)"). The spec that the trainer's plan is proved equal to
is therefore the unpartitioned model with the *same* per-stage clipping
(``Spec(clip_groups={stage: its parameters})``, :func:`trainer_spec` with
``clipping="per_stage"``). Against a spec with one *global* norm the plan is NOT EQUIVALENT: that
is B22's class (torchtitan #596), here the trainer's intended behaviour, not a bug.

Modelling: the pipeline is :class:`spec_lang.pipeline.Pipeline` with virtual stages
``[embed, T_1, ..., T_S, head]`` on ``Mesh(pp=S+2)`` under GPipe with M micro-batches. The trainer
runs ``embed`` and ``head`` on one device (stage 0); over the reals the device does not change a
value, and the clip group ``stage0`` is {embedding, final norm, head} exactly as the trainer's.
Activation hops are the pipeline's checked send/recv (identity over the reals), as the
trainer's detached-leaf hops are. The data has no mask: the trainer counts every token.
"""

from __future__ import annotations

from collections.abc import Mapping
from fractions import Fraction
from typing import Any

from spec_lang import ops
from spec_lang.collectives import all_reduce
from spec_lang.errors import PlanError
from spec_lang.mesh import Mesh
from spec_lang.models.llama import LlamaModel, SpecContext, transformer_block
from spec_lang.optim import AdamW
from spec_lang.pipeline import Pipeline, stage
from spec_lang.plan import Plan, microbatches as _microbatches
from spec_lang.plans.clipping import global_grad_norm_sq
from spec_lang.schedules import gpipe
from spec_lang.spec import Spec, index
from spec_lang.tensor import Tensor, user_site

PP = "pp"

__all__ = ["TRAINER_ADAM", "TRAINER_GRAD_CLIP", "stage_groups", "trainer_spec", "trainer_plan",
           "trainer_loss"]

TRAINER_GRAD_CLIP = 1
"""``TrainerConfig.grad_clip`` (1.0): the per-stage max norm."""

TRAINER_ADAM = AdamW(lr=Fraction(3, 1000), betas=(Fraction(9, 10), Fraction(999, 1000)),
                     eps=Fraction(1, 10**8), weight_decay=0, step=1)
"""``torch.optim.Adam(lr=3e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0)``: the trainer's
default LR (``TrainerConfig.lr``), first step."""


def stage_groups(model: LlamaModel, n_stages: int) -> dict[str, list[str]]:
    """The trainer's stages as parameter groups: ``stage0`` = embedding, final norm, head;
    ``stage{s}`` (s = 1..S) = layers ``(s-1) L/S .. s L/S - 1``.

    Raises:
        PlanError: S < 2 (the trainer requires it) or S does not divide the layer count.
    """
    n_layers = model.config.n_layers
    if n_stages < 2 or n_layers % n_stages:
        raise PlanError(f"{user_site(2)}: {n_stages} transformer stages: the trainer needs S >= 2 "
                        f"dividing the {n_layers} layers")
    per = n_layers // n_stages
    groups = {"stage0": ["tok_embeddings", "norm", "output"]}
    for s in range(1, n_stages + 1):
        groups[f"stage{s}"] = [k for k in model.params
                               if any(k.startswith(f"layers.{i}.")
                                      for i in range((s - 1) * per, s * per))]
    return groups


def trainer_loss(model: LlamaModel, logits: Tensor, labels: Tensor) -> Tensor:
    """``sum over tokens of CE / (|B| |S|)`` with the *global* ``|B|`` (all M micro-batches):
    on a micro-batch, its share of the iteration's token mean (``trainer/pipeline.py``,
    ``(loss_sum * scale).backward()`` with ``scale = 1 / tokens_per_iteration``)."""
    d = model.dims
    ce = ops.cross_entropy_per_token(logits, labels, d.V)
    return ops.sum(ce) / (ops.dim_size(d.B) * ops.dim_size(d.S))


def _embed(model: LlamaModel, p: Any, tokens: Tensor) -> Tensor:
    return ops.embedding(tokens, p["tok_embeddings"], model.dims.V)


def _blocks(model: LlamaModel, p: Any, x: Tensor, layers: range) -> Tensor:
    for i in layers:
        x = transformer_block(p.scope(f"layers.{i}"), x, model.config, model.dims, SpecContext())
    return x


def _head(model: LlamaModel, p: Any, x: Tensor, labels: Tensor) -> Tensor:
    d = model.dims
    x = ops.rms_norm(x, p["norm"], d.H, model.config.norm_eps)
    return trainer_loss(model, ops.einsum(x, p["output"], out=(d.B, d.S, d.V)), labels)


def trainer_spec(model: LlamaModel, n_stages: int, *, clipping: str = "per_stage",
                 optimizer: Any = TRAINER_ADAM, max_norm: Any = TRAINER_GRAD_CLIP) -> Spec:
    """The unpartitioned model's iteration: token-mean cross-entropy (no mask), Adam, clipping.

    Args:
        clipping: ``"per_stage"`` (the trainer's semantics: one ``clip_grad_norm_`` per stage
            group), ``"global"`` (one norm over every parameter) or ``"none"``.

    Raises:
        PlanError: an unknown ``clipping``.
    """
    if clipping not in ("per_stage", "global", "none"):
        raise PlanError(f"{user_site(2)}: clipping={clipping!r}: per_stage, global or none")
    d = model.dims

    def forward(p: Any, data: Mapping[str, Tensor]) -> Tensor:
        x = _blocks(model, p, _embed(model, p, data["tokens"]), range(model.config.n_layers))
        return _head(model, p, x, data["labels"])

    return Spec(params=model.params,
                data={"tokens": index(d.B, d.S, range=d.V), "labels": index(d.B, d.S, range=d.V)},
                forward=forward, optimizer=optimizer,
                clip_grad_norm=None if clipping == "none" else max_norm,
                clip_groups=stage_groups(model, n_stages) if clipping == "per_stage" else None,
                site=user_site(2))


def trainer_plan(model: LlamaModel, n_stages: int, n_microbatches: int, *,
                 spec: Spec | None = None) -> Plan:
    """The trainer's partition as a plan: stages, GPipe over M micro-batches, the loss scale
    ``1/(M B_mb T)``, per-stage clipping, Adam on every stage.

    Args:
        n_stages: S, transformer stages (``TrainerConfig.n_stages``).
        n_microbatches: M (``TrainerConfig.n_micro_batches``), splitting ``B``.
        spec: the spec this plan is compared with: its clipping decides how the plan *reports*
            the per-stage norms (one per clip group for a ``clip_groups`` spec; a per-stage value
            over ``pp`` for a global-norm spec). The trainer's behaviour is the same either way.
    """
    groups = stage_groups(model, n_stages)
    per = model.config.n_layers // n_stages
    stages = [stage(lambda p, d, io: io.send(_embed(model, p, d["tokens"])), ["tok_embeddings"])]
    for s in range(1, n_stages + 1):
        def run(p: Any, d: Any, io: Any, s: int = s) -> None:
            io.send(_blocks(model, p, io.recv(), range((s - 1) * per, s * per)))
        stages.append(stage(run, [f"layers.{i}." for i in range((s - 1) * per, s * per)]))
    stages.append(stage(lambda p, d, io: _head(model, p, io.recv(), d["labels"]),
                        ["norm", "output"]))
    pp = n_stages + 2
    pipe = Pipeline(stages, schedule=gpipe(pp=pp, microbatches=n_microbatches))
    phys_group = {0: "stage0", pp - 1: "stage0", **{s: f"stage{s}" for s in range(1, pp - 1)}}

    def group_norm_sq(grads: Mapping[str, Tensor], grp: str) -> Tensor:
        # a pipeline gradient exists only on the pp coordinate(s) holding its parameter
        # (Pipeline.held_grads): each coordinate of the group squares its own gradients, and
        # the sum over pp stands for the one device's sum (stage 0 is modelled as coordinates
        # 0 and pp-1; a transformer stage's group is on one coordinate, the others add 0)
        coords = [s for s, g in phys_group.items() if g == grp]
        mine = {k: grads[k] for k in groups[grp]}
        return all_reduce(pipe.per_stage(
            {s: global_grad_norm_sq(pipe.stage_grads(s, mine)) for s in coords}), PP)

    def grad_norm_sq(grads: Mapping[str, Tensor]) -> Any:
        if spec is not None and spec.clip_groups is not None:
            return {grp: group_norm_sq(grads, grp) for grp in groups}
        # one value per physical stage: the norm of the trainer stage it belongs to
        return pipe.per_stage(lambda s: group_norm_sq(grads, phys_group[s]))

    clip = spec is not None and spec.clip_grad_norm is not None
    return Plan(mesh=Mesh(pp=pp), forward=pipe.forward, schedule=pipe,
                microbatches=_microbatches(n_microbatches, model.dims.B),
                grad_norm_sq=grad_norm_sq if clip else None,
                assumptions=(f"the harness trainer: embedding stage + {n_stages} transformer "
                             f"stages, {n_microbatches} micro-batches, per-stage clipping, "
                             "Adam per stage",),
                site=user_site(2))
