"""Debug Llama (2 layers, 4 query / 2 KV heads) under Megatron-LM TP2 + sequence parallelism x DP2.

Same layout as ``llama_debug_megatron.py`` with ``sp=True``: between TP regions the residual
stream and the RMSNorms run on sequence shards Shard(S) over tp; the TP regions are entered by
all-gather S (``gather_from_sp_region``) and left by reduce-scatter S
(``reduce_scatter_to_sp_region``); the norm weights' gradients, partial over tp, are all-reduced
over tp (``docs/parallelism/sequence-parallel.md``).
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
plan = megatron(model, tp=2, dp=2, microbatches=2, layers=layer_plan, sp=True)
