"""Adversarial round 53a: dev53 (c13cbd0) against 8a29920.

* ``dims._refine``: a plan view that splits a spec dim into sizes with a unit part is a
  node-level ``DimsError`` (the node unsupported) instead of an analysis-wide ``Refine``
  restart. a1/a2 (slow): one-row local batches flattened (``plans/round53a/r53a_01`` right,
  ``r53a_02`` wrong): UNKNOWN, never EQUIVALENT. a3 (fast, R53a-1, latent): a ``DimsError``
  raised in ``Dims.same`` after an earlier pair was joined leaves the join behind; the
  ``Refine`` restart used to discard it for the unit-split case.
* ``--no-lint`` in the checker's re-trace only: a4 (fast) a DSL plan that reads
  ``spec_lang.partial.LINT`` and is right for ``prove``'s trace, B26's bug for the checker's:
  the checker rejects (``prove`` exits 4, DISAGREES); a5 (fast) a plan that turns
  ``PartialSumWarning`` into an error to probe the lint: the lint is collected per trace, the
  probe never raises, both traces see the bug: NOT EQUIVALENT; a6 (fast) ``--no-lint`` cannot
  reach ``prove``'s own trace through the plan's path.
"""

from __future__ import annotations

import functools
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from proofs.isolation import start_trace
from spec_lang.torch_frontend.dims import Dims, DimsError

ROOT = Path(__file__).resolve().parents[2]
PLANS = Path(__file__).resolve().parent / "plans" / "round53a"


def _cli(*args: str, main: str = "prove_main") -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", f"import sys; from proofs.cli import {main}; "
                           f"sys.exit({main}(sys.argv[1:]))", *args], cwd=PLANS,
                          capture_output=True, text=True, timeout=1500,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})


@functools.lru_cache(maxsize=None)
def _prove_torch(name: str) -> tuple[int, dict | None, str]:
    r = _cli("--torch", name, "--json", "--no-check", "--jobs", "1")
    return r.returncode, (json.loads(r.stdout) if r.stdout.strip() else None), r.stderr


# -- (1) a split into a unit dim ----------------------------------------------------------------

@pytest.mark.slow   # ~90 s each on a loaded 2-core machine
@pytest.mark.parametrize("name", ["r53a_01_dp_batch1_flat_linear_right.py",
                                  "r53a_02_dp_batch1_flat_linear_sum_wrong.py"])
def test_a1_a2_one_row_batch_flattened_is_unknown(name):
    rc, out, err = _prove_torch(name)
    assert out is not None and out["verdict"] == "UNKNOWN", (rc, out, err[-1500:])
    text = json.dumps(out)
    # the SGD update meets the flat row's unit block: the weight's goal is open at its line
    assert "a local view splits the spec's dim weight#0 into sizes [1, " in text, text[-3000:]


@pytest.mark.slow   # R53a-2, fixed at stop 53 (analysis.py strips the site from the reason)
def test_a1_the_open_reason_names_its_site_once():
    rc, out, err = _prove_torch("r53a_01_dp_batch1_flat_linear_right.py")
    site = "r53a_01_dp_batch1_flat_linear_right.py:41"
    text = json.dumps(out)
    assert site in text and f"{site}: {site}" not in text, text[-3000:]


def _same_with_a_unit_split(d: Dims):
    c = d.fresh(3, "t.py:1")                           # no lineage (an in-step torch.ones)
    e = d.fresh(3, "t.py:1", info=("k#0", ()))         # spec dim k
    a1 = d.fresh(1, "t.py:1", info=("b#0", ("dp",)))   # the rank's block of a size-2 dim
    an = d.fresh(6, "t.py:1")
    b = d.fresh(6, "t.py:1", info=("h#0", ()))         # spec dim h, unsharded
    return c, e, [c, a1, an], [e, b]


def test_a3_the_unit_split_is_a_dims_error_at_the_nodes_line():
    d = Dims(axis_sizes={"dp": 2})
    _, _, left, right = _same_with_a_unit_split(d)
    with pytest.raises(DimsError, match=r"^t\.py:9: a local view splits the spec's dim h#0 "
                                        r"into sizes \[1, 6\]"):
        d.same(left, right, "t.py:9")


def test_a3_a_failed_same_leaves_no_join_behind():
    """R53a-1 (latent, no false accept found): fixed at stop 53, ``Dims.same`` and every op's
    rule are transactions (``Dims.transaction``): a failure undoes its joins."""
    d = Dims(axis_sizes={"dp": 2})
    c, e, left, right = _same_with_a_unit_split(d)
    with pytest.raises(DimsError):
        d.same(left, right, "t.py:9")
    assert d.find(c) is not d.find(e) and d.info(c) is None, d.info(c)


# -- (3) the lint switch ------------------------------------------------------------------------

def test_a4_a_plan_reading_the_lint_switch_is_rejected_by_the_checker(tmp_path):
    cert = tmp_path / "c.json"
    r = _cli("r53a_03_dsl_lint_flag_switches_plan.py", "--certificate", str(cert))
    assert r.returncode == 4, (r.returncode, r.stdout[-800:], r.stderr[-800:])
    assert "DISAGREES" in r.stdout + r.stderr
    assert "the certificate's actual term is not the plan's" in r.stderr, r.stderr[-800:]
    c = _cli(str(cert), main="check_main")                      # the standalone checker too
    assert c.returncode == 4 and "rejected: --retrace: goal loss" in c.stderr, c.stderr[-800:]


def test_a5_warnings_as_errors_cannot_probe_the_lint():
    r = _cli("r53a_04_dsl_warning_as_error_switches_plan.py")
    assert r.returncode == 1 and "NOT EQUIVALENT" in r.stdout, (r.returncode, r.stdout[-800:])
    assert "first divergence: goal loss" in r.stdout


def test_a6_a_plan_path_cannot_turn_the_lint_off():
    """The flag is the child's sixth argument only: a plan *named* ``--no-lint`` is traced with
    the lint on (its warnings printed)."""
    src = (ROOT / "examples" / "bugs" / "B26_buggy.py").read_bytes()
    pending = start_trace("--no-lint", src, frontend="dsl", timeout_s=300)
    pd = pending.result()
    assert [g["name"] for g in pd.goals][:1] == ["loss"]
    assert "PartialSumWarning" in pending.stderr and "added |dp| times" in pending.stderr, \
        pending.stderr[-500:]
