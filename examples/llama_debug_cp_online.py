"""Debug Llama (2 layers, sequence 8) under CP2 x DP2 with online-softmax attention.

Load-balanced chunks as in ``llama_debug_cp.py``; attention keeps each rank's K/V block and
merges the cp blocks with the online-softmax rescaling (per-block max m_r, global running max
m = max_r m_r, rescale exp(m_r - m), summed denominators, then each block's normalised output
summed over cp): ring attention's arithmetic with an all-gather / reduce-scatter exchange
(``spec_lang/plans/context_parallel.py``, ``cp_attention_online``).
"""

from spec_lang import AdamW
from spec_lang.models import DEBUG, llama
from spec_lang.plans.context_parallel import CPSettings, context_parallel

model = llama(DEBUG)
spec = model.spec(AdamW())
plan = context_parallel(model, cp=2, dp=2, settings=CPSettings(attention="online"))
