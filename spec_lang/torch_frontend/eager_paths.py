"""The paths torch takes under ``make_fx`` that differ from the eager run the capture stands
for, set to what the traced step must follow.

* **Attention:** one route for the spec and the plan. DTensor decomposes
  ``scaled_dot_product_attention`` to the math path (there is no sharding rule for the CPU
  flash kernel), so the spec takes it too (``sdpa_kernel([SDPBackend.MATH])``).
* **Selective activation checkpointing** (``create_selective_checkpoint_contexts``, torchtitan's
  ``ac_mode="selective"``): torch's SAC saves *every* operator's output in the forward when a
  proxy mode is active (``torch.utils.checkpoint._is_compiling``: "under AOTAutograd tracing")
  and its recomputation then returns the saved values, where the eager run recomputes every
  operator its policy does not save. A recomputation that differs from the forward (a global
  read by the block and changed between the forward and the backward, RNG without
  ``preserve_rng_state``) would be invisible to the trace. Within :func:`eager_paths` the
  decision is eager's (no proxy mode), so the traced recomputation is the eager run's
  (R40a-6's review).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

from torch.nn.attention import SDPBackend, sdpa_kernel

__all__ = ["eager_paths"]


def _eager_is_compiling(func: Any, args: Any, kwargs: Any) -> bool:  # noqa: ARG001
    """What ``torch.utils.checkpoint._is_compiling`` answers in an eager run."""
    return False


@contextlib.contextmanager
def eager_paths() -> Iterator[None]:
    """Within the block (the traced step): attention by the math route, and selective
    activation checkpointing deciding as in an eager run (module docstring). Restores torch's
    function afterwards, also when the block raises."""
    import torch.utils.checkpoint as ck  # noqa: PLC0415

    own = ck._is_compiling  # noqa: SLF001
    ck._is_compiling = _eager_is_compiling  # noqa: SLF001
    try:
        with sdpa_kernel([SDPBackend.MATH]):
            yield
    finally:
        ck._is_compiling = own  # noqa: SLF001
