"""Adversarial round 35e (``tests/adversarial/ATTEMPTS.md``, "Round 35e"), against wip/adv35e at
7e4c002 (= main: ``thread_guard._symbols_formatted``, ``torch.SymFloat`` / ``SymInt``
``__format__`` returns the symbol's name in the traced step, R35d-5's fix). Plans in
``plans/round35e/``. Truth: ``tests/adversarial/torch4_truth.py FILE 2`` (dp 2); gloo, float64.

* R35e-1 (false accept, new with 7e4c002; ``r35e_01`` SymFloat + f-string, ``r35e_04`` SymInt +
  ``str.format``, dp 2; ``r35e_06`` pp 2 x dp 2): the step formats an all-reduced ``.item()`` with a spec and reads the
  text without an exception (``float(s) if s.isdigit() else 1.0``): real "2", capture "zuf0" /
  "u0". At 5455d86 the format raised TypeError and the capture stopped (exit 3). Truth w1 0.0070,
  w2 0.0093 after step 1 (dp); params 0.028 .. 0.131 (pp x dp).
* R35e-2 (false refusal, R35d-5's fix incomplete; ``r35e_02`` ``print("loss %.4f" %
  loss.item())``, ``r35e_03`` ``logging`` at INFO ``info("loss %.4f", loss.item())``, dp 2, right):
  ``%f`` calls ``SymFloat.__float__``, not ``__format__``: exit 3 (GuardOnDataDependentSymNode;
  for logging, whose ``emit`` swallows the error, the recorded data-dependent read, with R35a-3's
  message about a try/except).
"""

from __future__ import annotations

from pathlib import Path

import pytest

ROUND35E = Path(__file__).resolve().parent / "plans" / "round35e"
ROUND35D = Path(__file__).resolve().parent / "plans" / "round35d"


def _not_accepted(out: dict) -> bool:
    """Anything but EQUIVALENT (NOT EQUIVALENT, UNKNOWN or a refusal)."""
    return out["_rc"] != 0 and out.get("verdict") != "EQUIVALENT"


def _equivalent(out: dict) -> bool:
    return out["_rc"] == 0 and out.get("verdict") == "EQUIVALENT"


def _prove(name: str, tmp_path: Path) -> dict:
    from tests.adversarial.torch_prove import prove

    return prove(ROUND35E / name, tmp_path)


# -- findings (open: strict xfail) --------------------------------------------------------------

@pytest.mark.slow
def test_r35e_1_item_format_isdigit_is_not_accepted(tmp_path):
    """EQUIVALENT at 7e4c002 (4 goals, 47 s); exit 3 at 5455d86 (TypeError, 13 s); truth w1
    0.0070, w2 0.0093 after step 1 (0.0086 / 0.0118 after step 2). Fixed by reverting
    7e4c002 (R35d-5 open again): formatting a symbol with a spec stops the capture."""
    out = _prove("r35e_01_dp_allreduce_item_format_isdigit.py", tmp_path)
    assert _not_accepted(out), out


@pytest.mark.slow
def test_r35e_1_int_item_str_format_isdigit_is_not_accepted(tmp_path):
    """EQUIVALENT at 7e4c002 (4 goals, 45 s); truth w1 0.0070, w2 0.0093 after step 1. Fixed
    by reverting 7e4c002."""
    out = _prove("r35e_04_dp_allreduce_int_item_str_format_isdigit.py", tmp_path)
    assert _not_accepted(out), out


@pytest.mark.slow
@pytest.mark.xfail(strict=True, reason="R35e-2: '%.4f' % loss.item() calls SymFloat.__float__ "
                   "(data-dependent guard), not the patched __format__")
def test_r35e_2_percent_format_logging_is_equivalent(tmp_path):
    """exit 3 at 7e4c002 (GuardOnDataDependentSymNode, 15 s); a right plan."""
    out = _prove("r35e_02_dp_loss_item_percent_format_right.py", tmp_path)
    assert _equivalent(out), out


@pytest.mark.slow
@pytest.mark.xfail(strict=True, reason="R35e-2: logging.info('%.4f', loss.item()) at INFO: "
                   "the handler's float() is recorded as a data-dependent read")
def test_r35e_2_logging_info_is_equivalent(tmp_path):
    """exit 3 at 7e4c002 (R35a-3's record, 16 s); a right plan."""
    out = _prove("r35e_03_dp_loss_item_logging_info_right.py", tmp_path)
    assert _equivalent(out), out


# -- sound / right outcomes kept ----------------------------------------------------------------

@pytest.mark.slow
@pytest.mark.xfail(strict=True, reason="R35d-5 (open again: 7e4c002 reverted for R35e-1)")
def test_r35d_06_loss_item_format_logging_is_equivalent(tmp_path):
    """R35d-5's plan: EQUIVALENT at 7e4c002 (31 s); refused again since its revert."""
    from tests.adversarial.torch_prove import prove

    out = prove(ROUND35D / "r35d_06_dp_loss_item_logging_right.py", tmp_path)
    assert _equivalent(out), out


@pytest.mark.slow
def test_r35d_07_loss_item_format_logging_swallowed_is_refused_by_design(tmp_path):
    """EQUIVALENT at 7e4c002 (42 s); refused (exit 3) since R35d-2's fix (``value_reads``): the
    same caught format error with a fallback that changes the step is r35d_10, a false accept,
    and the capture cannot tell the two apart (``test_round35d.py`` asserts the message)."""
    from tests.adversarial.torch_prove import prove

    out = prove(ROUND35D / "r35d_07_dp_loss_item_logging_swallowed_right.py", tmp_path)
    assert out["_rc"] == 3 and "(SymFloat.__format__)" in out["_err"], out


@pytest.mark.slow
@pytest.mark.xfail(strict=True, reason="R35d-5 on the pipelined path (open again: 7e4c002 "
                   "reverted for R35e-1)")
def test_r35e_pp_loss_item_format_logging_is_equivalent(tmp_path):
    """pp 2 x dp 2, right, ``print(f"loss {loss.item():.4f}")``: EQUIVALENT at 7e4c002 (74 s);
    refused again since its revert."""
    out = _prove("r35e_05_pp_dp_loss_item_format_logging_right.py", tmp_path)
    assert _equivalent(out), out


@pytest.mark.slow
def test_llama_tp_is_equivalent(tmp_path):
    """Documented EQUIVALENT: EQUIVALENT at 7e4c002 (106 goals, 39 s)."""
    from tests.adversarial.torch_prove import prove

    out = prove(Path(__file__).resolve().parents[2] / "examples" / "torch" / "llama_tp.py", tmp_path)
    assert _equivalent(out), out


@pytest.mark.slow
def test_r35e_1_pp_item_format_isdigit_is_not_accepted(tmp_path):
    """EQUIVALENT at 7e4c002 (12 goals, 76 s); exit 3 at 5455d86 (13 s); pp_truth: params differ
    by 0.028 .. 0.131 (lr doubled). Fixed by reverting 7e4c002."""
    out = _prove("r35e_06_pp_dp_allreduce_item_format_isdigit.py", tmp_path)
    assert _not_accepted(out), out
