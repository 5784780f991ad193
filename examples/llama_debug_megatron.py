"""Debug Llama (2 layers, 4 query / 2 KV heads) under Megatron-LM TP2 x DP2, 2 micro-batches.

The fast example the tests prove: KV heads split over tp (kv_heads % tp == 0). Vocab-parallel
embedding and cross-entropy; AdamW on the local shards (``docs/plans.md``).
"""

from spec_lang import AdamW
from spec_lang.models import DEBUG, llama
from spec_lang.plans import colwise, megatron, replicated, rowwise

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
