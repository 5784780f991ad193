"""Debug Llama (2 layers, 4 query / 2 KV heads, sequence 8) under Megatron CP2 x DP2.

Load-balanced context parallelism: the sequence is cut into 4 chunks and CP rank c holds chunks
c and 3-c; tokens, labels, mask, RoPE positions and the causal mask all use that one map. K/V
are all-gathered over cp (backward: reduce-scatter); per-token loss normalised by the global
token count over dp x cp; gradients all-reduced over cp and dp
(``spec_lang/plans/context_parallel.py``, ``docs/parallelism/context-parallel.md``).
"""

from spec_lang import AdamW
from spec_lang.models import DEBUG, llama
from spec_lang.plans.context_parallel import context_parallel

model = llama(DEBUG)
spec = model.spec(AdamW())
plan = context_parallel(model, cp=2, dp=2)
