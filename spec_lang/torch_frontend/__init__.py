"""The PyTorch front end: ``prove --torch train.py`` (``docs/torch.md``).

``load(path, source=None) -> Problem`` captures the user's own single-device and parallel
training step (``FRONTEND.md``) and lowers both into the IR the prover shares with the DSL.
torch is imported here and below only, and only in :mod:`proofs.isolation`'s tracing child:
``check-certificate`` and the prover never import this package in their own process.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from spec_lang.torch_frontend.version import SUPPORTED_TORCH, UnsupportedTorch, check_torch

__all__ = ["load", "SUPPORTED_TORCH", "UnsupportedTorch", "check_torch"]


def load(path: str | Path, source: bytes | None = None) -> Any:
    """:func:`spec_lang.torch_frontend.frontend.load`, after checking the installed torch.

    Raises:
        UnsupportedTorch: torch is missing or not one of :data:`SUPPORTED_TORCH` (a
            ``PlanError``: ``prove`` exits 3 with its one line), before the file is read.
        PlanError: see :func:`spec_lang.torch_frontend.frontend.load`.
    """
    check_torch()
    from spec_lang.torch_frontend.frontend import load as _load

    return _load(path, source)
