"""Model library: specs of real models, written as blocks that plans reuse."""

from spec_lang.models.llama import (
    DEBUG, LLAMA3_8B, LlamaConfig, LlamaDims, LlamaModel, ParallelContext, SpecContext, llama,
)
from spec_lang.models.moe import MOE_DEBUG, MoEConfig, MoEModel, moe
from spec_lang.models.registry import MODELS, model_registry

__all__ = [
    # llama.py
    "DEBUG", "LLAMA3_8B", "LlamaConfig", "LlamaDims", "LlamaModel", "ParallelContext",
    "SpecContext", "llama",
    # moe.py
    "MOE_DEBUG", "MoEConfig", "MoEModel", "moe",
    # registry.py
    "MODELS", "model_registry",
]
