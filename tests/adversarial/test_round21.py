"""Adversarial round 21 (``tests/adversarial/ATTEMPTS.md``, "Round 21"), against the sixth
round of Coq lemmas (issue 17, merge c0f9734: gelu-def with ``ERF``, einsum-unit-dim,
squeeze-elementwise, reduce-max-unit-dim with the exporter's ``sz n = 1`` facts,
einsum-components, and the routing of steps with constants the exporter cannot read).

* R21-1 (fixed: ``coq_export._input_key``; the Coq layer alone, the Python checker rejects the certificate):
  the exporter's translation of ``INPUT`` rows is not one-to-one. It keeps a row's name and
  domain and drops its kind (``data`` / ``param`` / ...) and an index input's range dim, and the
  input it makes of a constant it cannot read is named ``const?<node>``, a name a certificate's
  own ``INPUT`` may carry. Two certificate nodes the Python checker holds distinct (two
  independent inputs; the constant ``2/sqrt(pi)`` and an input) become the same Coq leaf
  ``OInput nm d``, and a ``congr`` step with no children proves them equal: ``coq_check``
  reports the three false obligations of :func:`collide` **"checked"**. The fingerprint does
  not catch it (it compares the exporter's encoding with Coq's decoding, both after the loss).
  ERF's derivative (``2/sqrt(pi)``) makes unread constants, hence ``const?`` inputs, common
  since this round.
* R21-2 (fixed: the label escaped by ``_comment``, which also drops quotes, and
  ``coq_run._parse_output`` reads exactly four results; **through the CLI**, on a certificate the Python checker accepts):
  the exported file's first header line is ``(* {label}: ...`` and ``label`` is the
  certificate's path as given to ``check-certificate`` (``proofs/cli.py`` ``_coq`` ->
  ``coq_check(label=path)``), written without ``_comment``'s escaping. A file name with ``*)``
  closes the comment and the rest of the name is Coq source run before the real file: four
  ``Eval``s printing the exporter's fingerprint, codes ``0``, no claims and no rejected step are
  the first four results ``coq_run._parse_output`` reads. The plan ``tiny_dp_tp.py`` with an
  exact GELU (7 steps with ``2/sqrt(pi)`` taken as hypotheses, honestly "3 of 5 obligations
  Coq-checked, 2 under stated hypotheses") is reported "5 of 5 obligations Coq-checked" when its
  certificate is renamed; with ``coq_check(label=...)`` the six false edits of
  ``coq_certs6.ROUNDS6_MUTANTS`` (all rejected by Coq) are reported "checked".
* Every edit of the sixth round's hand-made certificate (``tests/proofs/coq_certs6.py``) that
  makes a step false or puts it outside its guard is rejected by the Python checker (full
  ``_check``: table, hashes, replay) and, on a combined edit, by Coq: kept as passing tests.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any, Callable

import pytest

from proofs.coq_export import export_certificate
from tests.proofs.coq_certs6 import _d, _q, rounds6
from tests.proofs.test_coq import coq_cache, needs_coq  # noqa: F401 (fixture)


# -- helpers -------------------------------------------------------------------------------
def _sealed(c: dict) -> dict:
    """``c`` with the hashes and ruleset the checker compares (the hand-made certificates of
    tests/proofs lack them: they are checked step by step there)."""
    from proofs.checker_rules import RULESET
    from proofs.kernel import NodeTable, node_hash_table, roots_hash, spec_binding
    c = copy.deepcopy(c)
    h = node_hash_table(NodeTable.from_json(c["nodes"]))
    obs = c["obligations"]
    c["spec_sha256"] = roots_hash(h, [(o["name"], o["expected"]) for o in obs],
                                  spec_binding(c["binding"]))
    c["plan_sha256"] = roots_hash(h, [(o["name"], o["actual"]) for o in obs], c["binding"])
    c["ruleset"] = {k: RULESET[k] for k in ("name", "version", "sha256")}
    return c


def _python_check(c: dict) -> str | None:
    """None when the Python checker (steps 2 to 6, no re-trace) accepts ``c``, else its
    one-line reason."""
    from proofs.checker import _check
    try:
        _check("round21.json", _sealed(c), 10.0)
    except Exception as e:  # noqa: BLE001 (any rejection: malformed, kernel, certificate)
        return f"{type(e).__name__}: {e}"
    return None


# -- R21-1: distinct inputs, one Coq leaf ----------------------------------------------------
def collide() -> dict:
    """Three false obligations, each a ``congr`` step between two leaves the Python checker
    holds distinct: ``x`` as data and ``x`` as a parameter; the constant ``2/sqrt(pi)`` (node 2,
    off the exporter's grammar: ``const?2`` in Coq) and an input named ``const?2``; an index
    input ``i`` over range ``B`` and one over range ``H``."""
    B = [["B", []]]
    nodes = [["INPUT", [], ["x", "data", "real"], B],                       # 0
             ["INPUT", [], ["x", "param", "real"], B],                      # 1
             ["CONST", [], [{"alg": [["2/1", [["pi", "-1/2"]]]]}], []],     # 2: 2/sqrt(pi)
             ["INPUT", [], ["const?2", "data", "real"], []],                # 3
             ["INPUT", [], ["i", "data", "index", "B"], [["S", []]]],       # 4
             ["INPUT", [], ["i", "data", "index", "H"], [["S", []]]]]       # 5
    rows = [("kind", 0, 1), ("constname", 2, 3), ("indexrange", 4, 5)]
    steps = [{"kind": "congr", "lhs": l, "rhs": r, "args": []} for _n, l, r in rows]
    obs = [{"name": n, "kind": "loss", "method": "rewrite", "expected": l, "actual": r,
            "proof": k} for k, (n, l, r) in enumerate(rows)]
    return {"format": "shardproof-certificate", "format_version": 3, "verdict": "EQUIVALENT",
            "binding": {"B": 4, "H": 3, "S": 4}, "nodes": nodes, "steps": steps,
            "obligations": obs, "plan": {"path": "collide.py", "sha256": "0" * 64}}


COLLIDE = ["kind", "constname", "indexrange"]


def test_r21_1_the_python_checker_rejects_the_colliding_congr_steps() -> None:
    why = _python_check(collide())
    assert why is not None and "differ" in why, why


@pytest.mark.parametrize("pair", [(0, 1), (2, 3), (4, 5)], ids=COLLIDE)
def test_r21_1_distinct_leaves_export_to_distinct_coq_ops(pair: tuple[int, int]) -> None:
    """Two rows the Python checker holds distinct (a congr step between them is rejected) must
    not translate to the same Coq op: ``congr`` proves two equal leaves equal."""
    from proofs.coq_export import _Names, _op
    rows = collide()["nodes"]
    names, unread = _Names(), []
    ops = [_op(rows[k], k, names, unread) for k in range(len(rows))]
    a, b = pair
    assert ops[a] != ops[b], (rows[a], rows[b], ops[a])


@pytest.fixture(scope="module")
def collide_report(coq_cache: Path):  # noqa: F811
    from proofs.coq_run import coq_check
    return coq_check(collide(), cache=coq_cache)


@needs_coq
@pytest.mark.slow
@pytest.mark.parametrize("name", COLLIDE)
def test_r21_1_coq_does_not_check_a_false_equation_of_two_leaves(collide_report,
                                                                 name: str) -> None:
    assert collide_report.status[name] != "checked", (name, collide_report.status)


# -- R21-2: the label closes the header comment ---------------------------------------------
def _evil_label(fingerprint: int, n: int, tail: str = "") -> str:
    """A file name (no ``/``) whose ``*)`` ends the header comment: the first four ``Eval``s
    coqc prints are then these (fingerprint, ``n`` codes 0, no claims, no rejected step)."""
    codes = " :: ".join(["0%N"] * n)
    return (f"c *) From Coq Require Import NArith Uint63 List. "
            f"Eval vm_compute in ({fingerprint}%uint63). "
            f"Eval vm_compute in ({codes} :: nil)%list. Eval vm_compute in (@nil nat). "
            f"Eval vm_compute in (@nil positive). (* {tail}")


def _outside_comments(src: str) -> str:
    """The text of ``src`` at comment depth 0 (Coq comments nest; no strings here)."""
    out, depth, i = [], 0, 0
    while i < len(src):
        if src.startswith("(*", i):
            depth, i = depth + 1, i + 2
        elif src.startswith("*)", i) and depth:
            depth, i = depth - 1, i + 2
        else:
            if depth == 0:
                out.append(src[i])
            i += 1
    return "".join(out)


def test_r21_2_the_label_cannot_close_the_header_comment() -> None:
    ex = export_certificate(rounds6())
    src = export_certificate(rounds6(), label=_evil_label(ex.fingerprint, 6)).source
    head = _outside_comments(src.split("From Coq Require Import List NArith Uint63.")[0])
    assert head.strip() == "", head


@needs_coq
@pytest.mark.slow
def test_r21_2_a_label_does_not_make_false_obligations_coq_checked(
        coq_cache: Path) -> None:  # noqa: F811
    from proofs.coq_run import coq_check
    from tests.proofs.coq_certs6 import ROUNDS6_MUTANTS
    c = copy.deepcopy(rounds6())
    for edit in ROUNDS6_MUTANTS.values():
        edit(c)
    label = _evil_label(export_certificate(c).fingerprint, 6)
    r = coq_check(c, cache=coq_cache, label=label)
    assert "checked" not in r.status.values() and sorted(r.failed_steps) == list(range(6)), \
        r.status


ROOT = Path(__file__).resolve().parents[2]


@needs_coq
@pytest.mark.slow
def test_r21_2_check_certificate_coq_report_does_not_depend_on_the_file_name(
        tmp_path: Path, capsys, coq_cache: Path) -> None:  # noqa: F811
    """tiny_dp_tp.py with the exact GELU: a certificate the Python checker accepts, 2 of whose 5
    obligations rest on steps with ``2/sqrt(pi)`` (hypotheses in Coq). Renamed, the same file
    is reported with every obligation Coq-checked."""
    import json
    import os
    import shutil
    from proofs.cli import check_main, prove_main
    plan = tmp_path / "tiny_gelu.py"
    src = (ROOT / "tests" / "proofs" / "plans" / "tiny_dp_tp.py").read_text()
    assert "ops.silu(" in src
    plan.write_text(src.replace("ops.silu(", "ops.gelu("))
    cwd = os.getcwd()
    os.chdir(tmp_path)
    try:
        assert prove_main(["tiny_gelu.py", "--certificate", "honest.json"]) == 0
        cert = json.loads((tmp_path / "honest.json").read_text())
        ex = export_certificate(cert)
        evil = _evil_label(ex.fingerprint, len(ex.obligations), ".json")
        assert "/" not in evil
        shutil.copy("honest.json", evil)
        capsys.readouterr()
        reports = {}
        for name in ("honest.json", evil):
            assert check_main([name, "--coq", "--json"]) == 0
            reports[name] = json.loads(capsys.readouterr().out)["coq"]["obligations"]
    finally:
        os.chdir(cwd)
    assert list(reports["honest.json"].values()).count("checked") < len(ex.obligations)
    assert reports[evil] == reports["honest.json"], reports


# -- the sixth round's instances, edited --------------------------------------------------------
def _set(node: int, k: int, v: Any) -> Callable[[dict], None]:
    def f(c: dict) -> None:
        c["nodes"][node][k] = v
    return f


def _bind(n: str, v: int) -> Callable[[dict], None]:
    def f(c: dict) -> None:
        c["binding"][n] = v
    return f


def _all(*fs: Callable[[dict], None]) -> Callable[[dict], None]:
    def f(c: dict) -> None:
        for g in fs:
            g(c)
    return f


def _alg(c: str, b: str) -> dict:
    return {"alg": [[c, [[b, "1/2"]]]]}


# rounds6's nodes: 1 GELU(x), 2 CONST 1/2, 3 CONST 1, 4 CONST 1/sqrt 2, 5 MUL(4, 0), 6 ERF(5),
# 7 ADD(3, 6), 8 MUL(2, 0, 7); 9 u(B,G,H), 10 y(G,H), 12 / 13 their squeezes; 17 MUL(p, s);
# 22 w(B,H,J); 27 a(H,S), 28 b(B,S), 29 c(F), 31 EINSUM(a, b), 32 EINSUM(c), 33 MUL(31, 32)
FALSE_EDITS: dict[str, Callable[[dict], None]] = {
    "gelu_half_is_1/3": _set(2, 2, [_q("1/3")]),
    "gelu_half_is_-1/2": _set(2, 2, [_q("-1/2")]),
    "gelu_one_is_2": _set(3, 2, [_q("2/1")]),
    "gelu_isqrt2_is_sqrt2": _set(4, 2, [_alg("1/1", "2")]),
    "gelu_isqrt2_is_isqrt3": _set(4, 2, [_alg("1/3", "3")]),
    "gelu_isqrt2_is_1/2": _set(4, 2, [_q("1/2")]),      # the table then duplicates node 2
    "gelu_isqrt2_noncanonical": _set(4, 2, [{"alg": [["1/1", [["2", "1/2"]]],
                                                     ["-1/2", [["2", "1/2"]]]]}]),  # value right
    "gelu_mul_order": _set(8, 1, [0, 2, 7]),
    "gelu_add_order": _set(7, 1, [6, 3]),
    "gelu_erf_arg_order": _set(5, 1, [0, 4]),
    "gelu_erf_is_tanh": _set(6, 0, "TANH"),
    "gelu_lhs_is_silu": _set(1, 0, "SILU"),
    "unitdim_squeeze_drops_H": _all(_set(12, 2, [["B"]]), _set(12, 3, _d("B"))),
    "unitdim_squeeze_keeps_G": _all(_set(12, 2, [["B", "G", "H"]]), _set(12, 3, _d("B", "G", "H"))),
    # G of size 2 sharded over tp of size 2: local size 1, global 2 (no size fact; guard: unsharded)
    "unitdim_G_local_size_1": _all(_bind("G", 2), _bind("tp", 2),
                                   _set(9, 3, [["B", []], ["G", ["tp"]], ["H", []]]),
                                   _set(10, 3, [["G", ["tp"]], ["H", []]])),
    "squeezeew_op_changed": _set(17, 0, "ADD"),
    "maxunit_J_is_2": _bind("J", 2),
    "components_part_sums_H": _all(_set(31, 2, [["B"]]), _set(31, 3, _d("B"))),
    "components_share_S": _all(_set(29, 3, _d("S")), _set(32, 3, [])),
}


@pytest.mark.parametrize("edit", sorted(FALSE_EDITS))
def test_edited_sixth_round_steps_are_rejected_by_the_python_checker(edit: str) -> None:
    c = copy.deepcopy(rounds6())
    FALSE_EDITS[edit](c)
    assert _python_check(c) is not None, edit


def test_the_unedited_certificate_and_a_true_edit_pass_the_python_checker() -> None:
    assert _python_check(rounds6()) is None
    c = copy.deepcopy(rounds6())     # c over B, a free dim shared with b: still two groups
    _all(_set(29, 3, _d("B")), _set(32, 2, [["B"]]), _set(32, 3, _d("B")))(c)
    assert _python_check(c) is None


def test_unit_facts_only_for_binding_size_one() -> None:
    """The size facts come from the binding only: G of size 2 sharded to local size 1 gets no
    ``sz G = 1`` (Coq then rejects the step rather than assume it)."""
    c = copy.deepcopy(rounds6())
    FALSE_EDITS["unitdim_G_local_size_1"](c)
    src = export_certificate(c).source
    facts = next(line for line in src.splitlines() if line.startswith("(* size facts"))
    assert "G = 1" not in facts and "K = 1" in facts, facts


@needs_coq
@pytest.mark.slow
def test_a_combined_false_edit_of_every_sixth_round_step_is_rejected_by_coq(
        coq_cache: Path) -> None:  # noqa: F811
    from proofs.coq_run import coq_check
    c = copy.deepcopy(rounds6())
    for k in ("gelu_isqrt2_is_sqrt2", "unitdim_G_local_size_1", "squeezeew_op_changed",
              "maxunit_J_is_2", "components_part_sums_H"):
        FALSE_EDITS[k](c)
    r = coq_check(c, cache=coq_cache)
    assert sorted(r.failed_steps) == list(range(6))
    assert set(r.status.values()) == {"not checked"}
