"""Model library: specs of real models, written as blocks that plans reuse."""

from spec_lang.models.deepseek import (
    DEEPSEEK_DEBUG, DEEPSEEK_V3, DeepSeekConfig, DeepSeekContext, DeepSeekModel, deepseek,
)
from spec_lang.models.llama import (
    DEBUG, LLAMA3_8B, LLAMA3_70B, LLAMA31_405B, LlamaConfig, LlamaDims, LlamaModel,
    ParallelContext, SpecContext, llama,
)
from spec_lang.models.gpt2 import GPT2_DEBUG, GPT2_SMALL, GPT2Config, GPT2Dims, GPT2Model, gpt2
from spec_lang.models.mixtral import MIXTRAL_8X7B, MIXTRAL_DEBUG, mixtral
from spec_lang.models.moe import MOE_DEBUG, MoEConfig, MoEModel, moe
from spec_lang.models.protocol import Stages, TransformerModel
from spec_lang.models.qwen2 import QWEN2_0_5B, QWEN2_7B, QWEN2_DEBUG, qwen2
from spec_lang.models.registry import MODELS, model_registry

__all__ = [
    # deepseek.py
    "DEEPSEEK_DEBUG", "DEEPSEEK_V3", "DeepSeekConfig", "DeepSeekContext", "DeepSeekModel",
    "deepseek",
    # gpt2.py
    "GPT2_DEBUG", "GPT2_SMALL", "GPT2Config", "GPT2Dims", "GPT2Model", "gpt2",
    # llama.py
    "DEBUG", "LLAMA3_8B", "LLAMA3_70B", "LLAMA31_405B", "LlamaConfig", "LlamaDims",
    "LlamaModel", "ParallelContext", "SpecContext", "llama",
    # mixtral.py
    "MIXTRAL_8X7B", "MIXTRAL_DEBUG", "mixtral",
    # moe.py
    "MOE_DEBUG", "MoEConfig", "MoEModel", "moe",
    # protocol.py
    "Stages", "TransformerModel",
    # qwen2.py
    "QWEN2_0_5B", "QWEN2_7B", "QWEN2_DEBUG", "qwen2",
    # registry.py
    "MODELS", "model_registry",
]
