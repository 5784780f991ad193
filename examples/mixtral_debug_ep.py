"""Debug Mixtral under expert parallelism EP2 x DP2: experts ``Shard(E)`` over ``ep``, tokens
over ``dp x ep``, the all-to-all dispatch and combine (``docs/parallelism/expert-parallel.md``)."""

from spec_lang import AdamW
from spec_lang.models import MIXTRAL_DEBUG, mixtral
from spec_lang.plans import expert_parallel

model = mixtral(MIXTRAL_DEBUG)
spec = model.spec(AdamW())
plan = expert_parallel(model, dp=2, ep=2)
