"""Models by name (STYLE rule 10): ``model_registry("llama3_8b")`` -> a model following
:mod:`spec_lang.models.protocol` (Llama, MoE, DeepSeek-V3, GPT-2, Mixtral, Qwen2)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from spec_lang.errors import SpecError
from spec_lang.models.llama import DEBUG, LLAMA3_8B, LLAMA3_70B, LLAMA31_405B, LlamaModel, llama

__all__ = ["MODELS", "model_registry"]

MODELS: dict[str, Callable[[], Any]] = {
    "llama3_8b": lambda: llama(LLAMA3_8B),
    "llama3_70b": lambda: llama(LLAMA3_70B),
    "llama31_405b": lambda: llama(LLAMA31_405B),
    "llama3_debug": lambda: llama(DEBUG),
    "debug": lambda: llama(DEBUG),
    "moe_debug": lambda: _moe_debug(),
    "deepseek_v3": lambda: _deepseek("DEEPSEEK_V3"),
    "deepseek_debug": lambda: _deepseek("DEEPSEEK_DEBUG"),
    "gpt2": lambda: _recipe("gpt2", "GPT2_SMALL"),
    "gpt2_debug": lambda: _recipe("gpt2", "GPT2_DEBUG"),
    "mixtral_8x7b": lambda: _recipe("mixtral", "MIXTRAL_8X7B"),
    "mixtral_debug": lambda: _recipe("mixtral", "MIXTRAL_DEBUG"),
    "qwen2_7b": lambda: _recipe("qwen2", "QWEN2_7B"),
    "qwen2_0_5b": lambda: _recipe("qwen2", "QWEN2_0_5B"),
    "qwen2_debug": lambda: _recipe("qwen2", "QWEN2_DEBUG"),
}


def _recipe(module: str, config: str):
    import importlib  # noqa: PLC0415

    mod = importlib.import_module(f"spec_lang.models.{module}")
    return getattr(mod, module)(getattr(mod, config))


def _deepseek(name: str):
    from spec_lang.models.deepseek import DEEPSEEK_DEBUG, DEEPSEEK_V3, deepseek  # noqa: PLC0415

    return deepseek({"DEEPSEEK_V3": DEEPSEEK_V3, "DEEPSEEK_DEBUG": DEEPSEEK_DEBUG}[name])


def _moe_debug():
    from spec_lang.models.moe import MOE_DEBUG, moe  # noqa: PLC0415

    return moe(MOE_DEBUG)


def model_registry(name: str) -> Any:
    """The model called ``name`` (see :data:`MODELS`).

    Raises:
        SpecError: unknown name (the message lists the known ones).
    """
    if name not in MODELS:
        raise SpecError(f"unknown model {name!r}; known: {sorted(MODELS)}")
    return MODELS[name]()
