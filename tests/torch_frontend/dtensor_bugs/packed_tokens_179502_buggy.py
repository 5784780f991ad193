"""``packed_tokens.py`` under the faulty ``view`` rule of pytorch #179502
(``dtensor_faults.py``): the sequence-sharded ``x`` is packed locally and declared ``Shard(0)``,
so the gathered stream holds rank 0's tokens of every sequence before rank 1's, and the causal
attention mixes the wrong positions (``tests/torch_frontend/oracle.py``: the loss, the gradient
and the update differ from the single-device step).

``prove --torch`` does not accept it; it cannot refute it either, today: the local program
packs a rank's sequence blocks into a stream that is not a block of any named dim, and the
front end stops at naming the sizes (exit 3; ``docs/torch.md``, "Bugs inside PyTorch").
"""

import dtensor_faults

dtensor_faults.install_view_179502()

from packed_tokens import *  # noqa: E402, F401, F403 -- the same model, plan and step
