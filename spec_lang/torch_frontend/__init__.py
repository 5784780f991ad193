"""The PyTorch front end: ``prove --torch train.py`` (``docs/torch.md``).

``load(path) -> Problem`` captures the user's own single-device and parallel training step
(``FRONTEND.md``) and lowers both into the IR the prover shares with the DSL. torch is imported
here and below only: ``check-certificate`` and the prover never import this package in their
own process.
"""

from spec_lang.torch_frontend.frontend import load
from spec_lang.torch_frontend.version import SUPPORTED_TORCH, check_torch

__all__ = ["load", "SUPPORTED_TORCH", "check_torch"]
