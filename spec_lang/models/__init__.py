"""Model library: specs of real models, written as blocks that plans reuse."""

from spec_lang.models.deepseek import (
    DEEPSEEK_DEBUG, DEEPSEEK_V3, DeepSeekConfig, DeepSeekContext, DeepSeekModel, deepseek,
)
from spec_lang.models.llama import (
    DEBUG, LLAMA3_8B, LLAMA3_70B, LLAMA31_405B, LlamaConfig, LlamaDims, LlamaModel,
    ParallelContext, SpecContext, llama,
)
from spec_lang.models.moe import MOE_DEBUG, MoEConfig, MoEModel, moe
from spec_lang.models.registry import MODELS, model_registry

__all__ = [
    # deepseek.py
    "DEEPSEEK_DEBUG", "DEEPSEEK_V3", "DeepSeekConfig", "DeepSeekContext", "DeepSeekModel",
    "deepseek",
    # llama.py
    "DEBUG", "LLAMA3_8B", "LLAMA3_70B", "LLAMA31_405B", "LlamaConfig", "LlamaDims",
    "LlamaModel", "ParallelContext", "SpecContext", "llama",
    # moe.py
    "MOE_DEBUG", "MoEConfig", "MoEModel", "moe",
    # registry.py
    "MODELS", "model_registry",
]
