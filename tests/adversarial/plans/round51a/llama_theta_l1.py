"""Round 51a: debug Llama under Megatron TP2 x DP2 (as examples/llama_debug_megatron.py), but the
plan's block 1 uses RoPE base 20000 (the spec's: 10000). NOT EQUIVALENT: one asymmetric layer
that falls out of its class."""

import importlib
from dataclasses import replace

from spec_lang import AdamW
from spec_lang.models import DEBUG, llama
from spec_lang.plans import colwise, megatron, replicated, rowwise

L = importlib.import_module("spec_lang.models.llama")
_orig = L.transformer_block


def _block(p, x, c, d, ctx):
    if not isinstance(ctx, L.SpecContext) and p.prefix.startswith("layers.1."):
        return _orig(p, x, replace(c, rope_theta=20000), d, ctx)
    return _orig(p, x, c, d, ctx)


L.transformer_block = _block
model = llama(DEBUG)
d = model.dims
layer_plan = {
    "attention_norm": replicated(),
    "attn.wq": colwise(d.KVH), "attn.wk": colwise(d.KVH), "attn.wv": colwise(d.KVH),
    "attn.wo": rowwise(d.KVH),
    "ffn_norm": replicated(),
    "mlp.w1": colwise(d.F), "mlp.w3": colwise(d.F), "mlp.w2": rowwise(d.F),
}
spec = model.spec(AdamW())
plan = megatron(model, tp=2, dp=2, microbatches=2, layers=layer_plan)
