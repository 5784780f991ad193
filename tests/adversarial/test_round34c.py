"""Adversarial round 34c (``tests/adversarial/ATTEMPTS.md``, "Round 34c"), against wip/adv34c at
ae5084f (= main: stop 34's ``real_literals.unread_real_literals``, the dtype check of aligned
twins, ``Traces.lift`` with four factors, ``frontend._without_unnamed_dims``). Plans in
``plans/round34c/``. Truth: ``tests/adversarial/torch4_truth.py FILE 2`` (dp),
``tests/torch_frontend/pp_truth.py FILE`` (pipelining); gloo, float64.

* R34c-1 (false accept; ``r34c_01`` dp 2, ``r34c_05`` pp 2 x dp 2, ``r34c_09`` the spec): ``_reshape_alias``'s stride
  argument is checked (row-major, ``rules_layout.ReshapeAlias``, R26-2) at the probe sizes only.
  ``_reshape_alias`` is data movement, so ``unread_real_literals`` (computing nodes) never sees
  it, and ``real_moves.move_meaning`` gives ``("reshape",)`` whatever its strides: strides
  column-major only when the gradient is square at the real sizes transpose it in the run.
  Truth 0.0146 / 0.0060 (dp), sq.weight grad 0.072 (pp); control ``r34c_02`` 2.8e-17,
  EQUIVALENT.
* R34c-2 (false accept; ``r34c_03`` dp 2): ``empty_strided``'s strides are exempt
  (``SHAPE_SIZE_ARGS``: "an empty tensor's strides are its shape's row-major ones"), and
  ``ReshapeAlias`` checks ``src.is_contiguous()`` on the probe trace only: a gradient copied
  into ``empty_strided((r, c), (1, r) if square else (c, 1))`` and read through
  ``_reshape_alias(t, [r, c], [c, 1])`` (literals equal at both sizes) is transposed in the run.
  Truth 0.0146 / 0.0060.
* R34c-3 (false accept; ``r34c_06``, ``r34c_08`` dp 2): R27-1 at the real sizes only through the same
  exempt strides: ``dist.all_reduce`` of an ``empty_strided`` buffer whose rows are padded
  (strides ``(c + 1, 1)``) when the gradient is square at the real sizes; gloo reduces ``numel``
  raw elements, ``AllReduce.term`` checks contiguity on the probe trace only. Truth 0.0123 /
  0.0026 (control ``r34c_07`` 2.8e-17, EQUIVALENT).
"""

from __future__ import annotations

from pathlib import Path

import pytest

ROUND34C = Path(__file__).resolve().parent / "plans" / "round34c"
EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "torch"


def _not_accepted(out: dict) -> bool:
    """Anything but EQUIVALENT (NOT EQUIVALENT, UNKNOWN or a refusal)."""
    return out["_rc"] != 0 and out.get("verdict") != "EQUIVALENT"


def _equivalent(out: dict) -> bool:
    return out["_rc"] == 0 and out.get("verdict") == "EQUIVALENT"


def _prove(name: str, tmp_path: Path) -> dict:
    from tests.adversarial.torch_prove import prove

    return prove(ROUND34C / name, tmp_path)


# -- findings (fixed in stop 34, 4d3b569: the right outcome asserted) ----------------------------

@pytest.mark.slow
def test_r34c_1_reshape_alias_strides_real_only_is_not_accepted(tmp_path):
    """EQUIVALENT at ae5084f (4 goals, 65 s); truth w1 0.0146, w2 0.0060 after step 1. Fixed in
    stop 34 (4d3b569, real_literals._layout_read): UNKNOWN (56 s)."""
    out = _prove("r34c_01_reshape_alias_strides_real_only.py", tmp_path)
    assert _not_accepted(out), out


@pytest.mark.slow
def test_r34c_1_pp_reshape_alias_strides_real_only_is_not_accepted(tmp_path):
    """EQUIVALENT at ae5084f (12 goals, 95 s); truth sq.weight grad 0.072, param 0.036. Fixed in
    stop 34: UNKNOWN (116 s)."""
    out = _prove("r34c_05_pp_reshape_alias_strides_real_only.py", tmp_path)
    assert _not_accepted(out), out


@pytest.mark.slow
def test_r34c_2_empty_strided_strides_real_only_is_not_accepted(tmp_path):
    """EQUIVALENT at ae5084f (4 goals, 58 s); truth w1 0.0146, w2 0.0060 after step 1. Fixed in
    stop 34: UNKNOWN (30 s)."""
    out = _prove("r34c_03_empty_strided_strides_real_only.py", tmp_path)
    assert _not_accepted(out), out


@pytest.mark.slow
def test_r34c_3_empty_strided_all_reduce_padded_real_only_is_not_accepted(tmp_path):
    """EQUIVALENT at ae5084f (4 goals, 16 s); truth w1 0.0123, w2 0.0026 after step 1. Fixed in
    stop 34: UNKNOWN (49 s)."""
    out = _prove("r34c_06_empty_strided_all_reduce_padded_real_only.py", tmp_path)
    assert _not_accepted(out), out


@pytest.mark.slow
def test_r34c_1_spec_reshape_alias_strides_real_only_is_not_accepted(tmp_path):
    """EQUIVALENT at ae5084f (4 goals, 60 s); truth w1 0.0146, w2 0.0060 after step 1. Fixed in
    stop 34: UNKNOWN (56 s)."""
    out = _prove("r34c_09_spec_reshape_alias_strides_real_only.py", tmp_path)
    assert _not_accepted(out), out


@pytest.mark.slow
def test_r34c_3_new_empty_strided_all_reduce_padded_real_only_is_not_accepted(tmp_path):
    """EQUIVALENT at ae5084f (4 goals, 35 s); truth w1 0.0123, w2 0.0026 after step 1. Fixed in
    stop 34: UNKNOWN (57 s)."""
    out = _prove("r34c_08_new_empty_strided_all_reduce_padded_real_only.py", tmp_path)
    assert _not_accepted(out), out


# -- controls and right plans (asserted) ----------------------------------------------------------

@pytest.mark.slow
def test_r34c_1_control_reshape_alias_row_major_is_equivalent(tmp_path):
    """r34c_01's control (row-major strides at every size, truth 2.8e-17): EQUIVALENT (63 s)."""
    out = _prove("r34c_02_reshape_alias_strides_right.py", tmp_path)
    assert _equivalent(out), out


@pytest.mark.slow
def test_r34c_3_control_empty_strided_all_reduce_row_major_is_equivalent(tmp_path):
    """r34c_06's control (a row-major buffer at every size, truth 2.8e-17): EQUIVALENT (69 s)."""
    out = _prove("r34c_07_empty_strided_all_reduce_right.py", tmp_path)
    assert _equivalent(out), out


@pytest.mark.slow
def test_bf16_matmuls_is_equivalent(tmp_path):
    """False-refusal sweep: matmuls in bfloat16 (``.to`` casts at both sizes alike; truth 2.7e-5,
    bfloat16 rounding only): EQUIVALENT at ae5084f (4 goals, 16 s)."""
    out = _prove("r34c_04_bf16_matmuls_right.py", tmp_path)
    assert _equivalent(out), out


@pytest.mark.slow
def test_llama_fsdp_tp_is_equivalent(tmp_path):
    """False-refusal sweep: FSDP2 x TP llama (``.float()`` loss cast, rotary ``arange``
    positions, RMSNorm means): EQUIVALENT at ae5084f (105 goals, 104 s)."""
    from tests.adversarial.torch_prove import prove

    out = prove(EXAMPLES / "llama_fsdp_tp.py", tmp_path)
    assert _equivalent(out), out


# -- fixed in stop 34: the layouts rules read, compared at the real sizes (unit level) ----------

def _unread(f, probe, real):
    import torch
    from torch.fx.experimental.proxy_tensor import make_fx

    from spec_lang.torch_frontend.literals import Traces
    from spec_lang.torch_frontend.real_literals import unread_real_literals

    def gm(shape):
        return make_fx(f, tracing_mode="fake")(torch.empty(*shape))
    return unread_real_literals(Traces(gm(probe), {}, {}, real=gm(real)), set())


def _column_major_when_square(g):
    import torch
    r, c = g.shape
    t = torch.empty_strided((r, c), (1, r) if r == c else (c, 1))
    t.copy_(g)
    return torch.ops.aten._reshape_alias(t, [r, c], [c, 1]) * 2.0


def _alias_transposed_when_square(g):
    import torch
    r, c = g.shape
    return torch.ops.aten._reshape_alias(g, [r, c], [1, r] if r == c else [c, 1]) * 2.0


@pytest.mark.parametrize("f", [_column_major_when_square, _alias_transposed_when_square])
def test_r34c_a_layout_taken_only_at_the_real_sizes_is_reported(f):
    found = _unread(f, (5, 7), (6, 6))
    assert any("_reshape_alias" in why and "row-major at the probe sizes and not at the real "
               "sizes" in why for _, why in found), found
    assert _unread(f, (5, 7), (4, 8)) == []          # row-major at both sizes: nothing


def test_r34c_a_layout_no_rule_reads_is_no_difference():
    """Values are what they are whatever the strides; only the rules that read the storage
    (``_reshape_alias``, a ``c10d`` all-reduce) need it row-major at both sizes."""
    import torch

    def f(g):
        r, c = g.shape
        t = torch.empty_strided((r, c), (1, r) if r == c else (c, 1))
        t.copy_(g)
        return t * 2.0 + g.t().sum()
    assert _unread(f, (5, 7), (6, 6)) == []
