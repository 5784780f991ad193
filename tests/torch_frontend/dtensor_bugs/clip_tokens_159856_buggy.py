"""``clip_tokens.py`` under the faulty norm rule that pytorch PR #159856 fixed
(``dtensor_faults.py``): the norm of a ``Partial(sum)`` gradient is taken on each rank's
summand and the norms are summed, so ``clip_grad_norm_`` divides by a total norm that is too
large and the update is scaled down.

``prove --torch`` refutes it (``tests/torch_frontend/test_dtensor_bugs.py``).
"""

import dtensor_faults

dtensor_faults.install_norm_159856()

from clip_tokens import *  # noqa: E402, F401, F403 -- the same model, plan and step
