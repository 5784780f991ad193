"""Debug Llama with one KV head (kv_heads < tp) under Megatron-LM TP2 x DP2, 2 micro-batches.

With fewer KV heads than tp ranks the KV projections are replicated and the query heads of each
group (``G``) are split over tp instead. The replicated wk/wv enter the TP region through
copy_to_tp, so their gradients (each rank's partial sum over its query heads) are all-reduced.
"""

from dataclasses import replace

from spec_lang import AdamW
from spec_lang.models import DEBUG, llama
from spec_lang.plans import colwise, megatron, replicated, rowwise

DEBUG_KVREP = replace(DEBUG, name="debug_kvrep", n_kv_heads=1)   # 4 query heads share 1 KV head

model = llama(DEBUG_KVREP)
d = model.dims
layer_plan = {
    "attention_norm": replicated(),
    "attn.wq": colwise(d.G), "attn.wk": replicated(), "attn.wv": replicated(),
    "attn.wo": rowwise(d.G),
    "ffn_norm": replicated(),
    "mlp.w1": colwise(d.F), "mlp.w3": colwise(d.F), "mlp.w2": rowwise(d.F),
}
spec = model.spec(AdamW())
plan = megatron(model, tp=2, dp=2, microbatches=2, layers=layer_plan)
