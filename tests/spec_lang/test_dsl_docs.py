"""docs/dsl.md and the package stay in sync (STYLE rules 1 and 8)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import spec_lang
from spec_lang.collectives import collectives_table

DOC = (Path(__file__).resolve().parents[2] / "docs" / "dsl.md").read_text()


def test_every_public_name_is_documented_in_its_module_group() -> None:
    section = DOC[DOC.index("## 11. Public API"):]
    documented = set(re.findall(r"`([A-Za-z_][A-Za-z0-9_]*)`", section))
    assert set(spec_lang.__all__) == documented
    assert len(spec_lang.__all__) == len(set(spec_lang.__all__))
    for name in spec_lang.__all__:
        assert hasattr(spec_lang, name), name


def test_collectives_table_is_generated_from_the_declarations() -> None:
    begin, end = "<!-- collectives-table:begin -->\n", "\n<!-- collectives-table:end -->"
    embedded = DOC[DOC.index(begin) + len(begin):DOC.index(end)]
    assert embedded == collectives_table()


def test_missing_file_row_matches_load_and_the_cli(tmp_path, capsys) -> None:
    import pytest

    from proofs.cli import prove_main
    from spec_lang.errors import SpecError

    row = next(ln for ln in DOC.splitlines() if ln.startswith("| missing / unreadable file"))
    nope = tmp_path / "nope.py"
    with pytest.raises(SpecError) as e:
        spec_lang.load(nope)
    assert str(e.value).startswith(f"{nope}:1: cannot read the plan file: ")
    assert "`path:1: cannot read the plan file: <reason>`" in row
    assert prove_main([str(nope)]) == 3
    assert capsys.readouterr().err == f"prove: error: {nope}: no such file\n"
    assert "`prove: error: path: no such file`" in row


def test_data_constructors_and_plan_defaults_are_documented() -> None:
    import dataclasses
    import inspect

    from spec_lang.plan import Plan

    for f in (spec_lang.real, spec_lang.positive, spec_lang.mask):
        assert str(inspect.signature(f)).startswith("(*dims")
        assert f"`{f.__name__}(*dims)`" in DOC
    assert "`index(*dims, range=V)`" in DOC
    section = DOC[DOC.index("* **Defaults.**"):DOC.index("* **Two ways to write the data-parallel")]
    for fld in dataclasses.fields(Plan):
        if fld.name in ("mesh", "forward", "site"):
            continue
        default = fld.default if fld.default is not dataclasses.MISSING else fld.default_factory()
        assert f"`{fld.name}={default!r}`" in section, (fld.name, default)


def _dp_style(tmp_path, capsys, prefactor: bool, op: str):
    import json

    from proofs.cli import prove_main

    root = Path(__file__).resolve().parents[2]
    src = (root / "tests" / "proofs" / "plans" / "tiny_dp_tp.py").read_text()
    if prefactor:
        src = src.replace("return Loss(backward=loss,", "return Loss(backward=ops.axis_size(DP) * loss,")
    src = src.replace('all_reduce(g, DP, "sum")', f'all_reduce(g, DP, "{op}")')
    p = tmp_path / f"dp_{prefactor}_{op}.py"
    p.write_text(src)
    code = prove_main([str(p), "--json"])
    return code, json.loads(capsys.readouterr().out)


@pytest.mark.slow   # ~9 s (CI is at its 10-minute budget; `-m slow` runs it)
def test_the_two_dp_reduction_styles_of_section_7(tmp_path, capsys) -> None:
    # sum with the 1/|dp| addend seed, avg with the |dp| pre-factor: both EQUIVALENT
    assert _dp_style(tmp_path, capsys, False, "sum")[0] == 0
    assert _dp_style(tmp_path, capsys, True, "avg")[0] == 0
    # mixed: refuted at the factor the doc names
    for prefactor, op, ratio, word in ((False, "avg", 0.5, "1/|dp|"), (True, "sum", 2.0, "= |dp|")):
        code, v = _dp_style(tmp_path, capsys, prefactor, op)
        cx = v["counterexample"]
        assert code == 1 and cx["goal"].startswith("grad:"), v
        assert abs(float(cx["ratio"]) - ratio) < 1e-9 and word in cx["explanation"], cx
