"""Stop 48 (lead): the DDP-based ``replicate``'s parameter view read through torch's C
descriptor, after FSDP2's stand-in became a real leaf (``fsdp_unsharded``) and the ``.grad``
guard (``fsdp_grads.unsharded_grad_reads_refused``) was left covering ``replicate``'s views only.
Plans in ``plans/round48/``. Truth: ``tests/adversarial/torch4_truth.py FILE 2``.
"""

from __future__ import annotations

from pathlib import Path

import pytest

ROUND48 = Path(__file__).resolve().parent / "plans" / "round48"

pytestmark = pytest.mark.slow


def test_r48_ddp_replicate_c_descriptor_read_refused(tmp_path):
    """``torch._C.TensorBase.__dict__["is_leaf"].__get__(mod.weight)`` in a forward hook under
    the DDP-based ``replicate`` (for real the parameter, a leaf; the stand-in's gradient-reducing
    view is not): truth wrong (w1 0.0027, w2 0.0033). The C getter defers to the tensor
    subclass's ``torch.Tensor.is_leaf``, the guarded property: exit 3 naming the line (18 s)."""
    from tests.adversarial.torch_prove import prove

    out = prove(ROUND48 / "r48_01_ddp_replicate_c_is_leaf_wrong.py", tmp_path)
    assert out["_rc"] == 3 and ".is_leaf" in out["_err"] and ":26:" in out["_err"], out
