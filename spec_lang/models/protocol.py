"""The model protocol: what a model must provide for the library's plan builders to run it.

A plan builder (:func:`spec_lang.plans.megatron`, ``zero1/2/3``, ``fsdp``, ``hsdp``,
``fsdp_tp``, ``torchtitan_2d``, ``torchtitan_3d``, ``megatron_3d``) never looks at a model's
class: it asks for the members below (``docs/tutorial-own-model.md`` writes one from scratch;
:class:`~spec_lang.models.llama.LlamaModel`, :class:`~spec_lang.models.gpt2.GPT2Model` and
:class:`~spec_lang.models.moe.MoEModel` implement it).

Data: ``params`` (name -> dims), ``data`` (``tokens``, ``labels`` in ``index(B, S, range=V)``,
``mask`` in ``mask(B, S)``), ``dims`` with at least ``B S H V`` (``Dim`` objects), ``config``
with ``name`` and ``n_layers``. Layer ``i``'s parameters are named ``layers.{i}.<key>``.

Code: ``forward(p, data, ctx=None)`` returns the training objective and calls the context's hooks
(:class:`~spec_lang.models.llama.ParallelContext`: ``enter_tp`` / ``exit_tp`` around every
tensor-parallel region, ``embed``, ``head_input``, ``loss``); ``spec(optimizer)``; ``stages()``
returns the same forward cut into :class:`Stages` (pipeline plans put the pieces on stages).

Layout: ``tp_layer_plan(tp)`` gives one layer's placements over ``tp`` (keys relative to
``layers.{i}.``, values from :func:`colwise` / :func:`rowwise` / :func:`replicated`),
``tp_outer_plan()`` those of the other parameters (vocab-parallel embedding and head), and
``tp_region_weights`` the layer keys consumed inside a TP region (a *replicated* one among them
enters the region through Megatron's ``f``, so its partial gradient is all-reduced).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from spec_lang.errors import PlanError
from spec_lang.placement import Placement, Replicate, Shard
from spec_lang.term import Axis

__all__ = ["Stages", "TransformerModel", "colwise", "rowwise", "replicated", "model_of",
           "tp_placements", "caller_site"]

TP, DP = Axis.TP, Axis.DP


def caller_site() -> str:
    """``file:line`` of the first frame outside the ``spec_lang`` package (models and plans
    included): the user's line that asked for a model or a library plan, for error messages and
    ``Plan.site``."""
    import os  # noqa: PLC0415
    import sys  # noqa: PLC0415

    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    f = sys._getframe(1)  # noqa: SLF001
    while f is not None:
        fn = os.path.abspath(f.f_code.co_filename)
        if not fn.startswith(root + os.sep) and "importlib" not in fn \
                and not f.f_code.co_filename.startswith("<"):
            return f"{fn}:{f.f_lineno}"
        f = f.f_back
    return "<unknown>:0"


def colwise(dim: Any) -> dict[str, Placement]:
    """Column-parallel weight: output features ``dim`` split over tp."""
    return {TP: Shard(dim)}


def rowwise(dim: Any) -> dict[str, Placement]:
    """Row-parallel weight: input features ``dim`` split over tp (output Partial(sum))."""
    return {TP: Shard(dim)}


def replicated() -> dict[str, Placement]:
    """Every tp rank holds the whole weight."""
    return {TP: Replicate()}


@dataclass(frozen=True)
class Stages:
    """A model's forward as pieces a pipeline stage can run.

    Attributes:
        embed: ``(p, data, ctx) -> x`` the residual stream ``(B, S, H)`` entering layer 0.
        block: ``(i, p, x, data, ctx) -> (x', aux)``: layer ``i`` (``p`` is the whole
            parameter map; the block scopes it to ``layers.{i}``); ``aux`` an extra scalar loss
            term of the layer (an MoE balance loss) or ``None``.
        head: ``(p, x, data, ctx) -> seed``: final norm, head and ``ctx.loss``.
        embed_params / head_params: the non-layer parameters the first / last stage hold (a
            name in both is tied: the pipeline all-reduces its gradient over ``pp``).
    """

    embed: Callable[..., Any]
    block: Callable[..., Any]
    head: Callable[..., Any]
    embed_params: tuple[str, ...]
    head_params: tuple[str, ...]


@runtime_checkable
class TransformerModel(Protocol):
    """The members a plan builder uses (module docstring)."""

    config: Any
    dims: Any
    params: dict[str, Any]
    data: dict[str, Any]

    def forward(self, p: Any, data: Mapping[str, Any], ctx: Any = None) -> Any: ...
    def spec(self, optimizer: Any, **kw: Any) -> Any: ...
    def stages(self) -> Stages: ...
    def tp_layer_plan(self, tp: int) -> dict[str, dict[str, Placement]]: ...
    def tp_outer_plan(self) -> dict[str, dict[str, Placement]]: ...


def model_of(x: Any, what: str, site: str) -> Any:
    """The model behind ``x``: a model itself, its config (Llama, MoE, GPT-2), or a spec made by
    ``model.spec(...)``.

    Raises:
        PlanError: ``site: what needs a model ...`` for anything else.
    """
    if isinstance(x, TransformerModel):
        return x
    from spec_lang.models.gpt2 import GPT2Config, gpt2  # noqa: PLC0415
    from spec_lang.models.llama import LlamaConfig, llama  # noqa: PLC0415
    from spec_lang.models.moe import MoEConfig, moe  # noqa: PLC0415

    for cfg, make in ((LlamaConfig, llama), (MoEConfig, moe), (GPT2Config, gpt2)):
        if isinstance(x, cfg):
            return make(x)
    owner = getattr(getattr(x, "forward", None), "__self__", None)
    if isinstance(owner, TransformerModel):
        return owner
    raise PlanError(f"{site}: {what} needs a model following spec_lang.models.protocol "
                    f"(stages, tp_layer_plan, tp_outer_plan: docs/tutorial-own-model.md), its "
                    f"config, or a spec made by model.spec(...); got {type(x).__name__}")


def tp_placements(model: Any, tp: int,
                  layers: Mapping[str, Mapping[str, Placement]] | None = None
                  ) -> dict[str, dict[str, Placement]]:
    """Every parameter's placement over tp and the data inputs' over dp (``Shard(B)``).

    ``layers`` overrides :meth:`TransformerModel.tp_layer_plan` (keys relative to
    ``layers.{i}.``); a key a layer does not have is skipped (MoE layers without attention).
    """
    d = model.dims
    lp = model.tp_layer_plan(tp) if layers is None else layers
    pl: dict[str, dict[str, Placement]] = {k: dict(v) for k, v in model.tp_outer_plan().items()}
    pl.update({k: {DP: Shard(d.B)} for k in ("tokens", "labels", "mask")})
    for i in range(model.config.n_layers):
        for k, v in lp.items():
            if f"layers.{i}.{k}" in model.params:
                pl[f"layers.{i}.{k}"] = dict(v)
    return pl
