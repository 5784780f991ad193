"""CASES.md section 1, loss normalisation and scaling (B01 B03 B05 B07 B09 B10)."""

from tests.bugs.cases import assert_certified, assert_refuted


def test_b03_mean_of_means_is_refuted():
    # uneven masks: the per-token weights differ, so the loss and every gradient diverge
    assert_refuted("B03", goal="loss")


def test_b03_fixed_is_certified(tmp_path):
    assert_certified("B03", tmp_path)
