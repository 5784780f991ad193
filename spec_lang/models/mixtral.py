"""Mixtral as a spec: Llama-style attention with a softmax top-2 mixture of 8 SwiGLU experts.

Sources: Jiang et al. 2024, "Mixtral of Experts" (arXiv 2401.04088), table 1 (Mixtral 8x7B:
dim 4096, 32 layers, head dim 128, 32 / 8 heads, FFN 14336, vocab 32000, 8 experts, top-2) and
sec. 2.1 (the gate ``softmax(top2(x W_g))``: the selected logits' softmax, which equals the full
softmax renormalised over the selected experts); the released ``config.json`` (RoPE theta 1e6,
RMSNorm eps 1e-5). No shared expert, no routing bias.

The load-balancing loss is Megatron-LM's per-layer Switch loss (``moe_aux_loss_coeff``, the
``--moe-router-load-balancing-type aux_loss`` of its Mixtral recipe; Switch Transformer eq. 4):
``alpha E sum_e f_e P_e`` summed over layers, ``alpha = 0.01``. (Hugging Face's
``load_balancing_loss_func`` pools all layers' tokens before the product and multiplies by
``top_k``: another function, not modelled.)

The model *is* :class:`~spec_lang.models.moe.MoEModel` with ``gating="softmax"``: every MoE plan
(Megatron TP x DP with ETP = TP, expert parallelism, ZeRO / FSDP, the 3-D pipelines) runs it.
"""

from __future__ import annotations

from fractions import Fraction

from spec_lang.models.moe import MoEConfig, MoEModel, moe

__all__ = ["MIXTRAL_8X7B", "MIXTRAL_DEBUG", "mixtral"]

MIXTRAL_8X7B = MoEConfig(name="mixtral_8x7b", hidden=4096, n_layers=32, n_heads=32, n_kv_heads=8,
                         moe_ffn_hidden=14336, n_routed_experts=8, n_shared_experts=0, top_k=2,
                         gating="softmax", norm_topk_prob=True, routed_scaling=1,
                         balance_bias=False, aux_loss_alpha=Fraction(1, 100), vocab=32000,
                         rope_theta=1000000, norm_eps=Fraction(1, 10**5), batch=8, seq=4096)
"""Mixtral 8x7B (module docstring); batch and sequence length are the plan's choice."""

MIXTRAL_DEBUG = MoEConfig(name="mixtral_debug", hidden=8, n_layers=2, n_heads=2, n_kv_heads=1,
                          moe_ffn_hidden=4, n_routed_experts=4, n_shared_experts=0, top_k=2,
                          gating="softmax", norm_topk_prob=True, routed_scaling=1,
                          balance_bias=False, aux_loss_alpha=Fraction(1, 100), vocab=16,
                          rope_theta=1000000, batch=4, seq=4)
"""Two layers of 4 experts, softmax top-2: for tests."""


def mixtral(config: MoEConfig) -> MoEModel:
    """The Mixtral model of ``config`` (an MoE model with softmax top-k gating).

    Raises:
        SpecError: a config whose gating is not softmax, or sizes that do not fit.
    """
    from spec_lang.errors import SpecError  # noqa: PLC0415

    if config.gating != "softmax" or config.n_shared_experts:
        raise SpecError(f"{config.name}: Mixtral routes by softmax top-k, with no shared expert")
    return moe(config)
