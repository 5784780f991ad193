"""docs/dsl.md and the package stay in sync (STYLE rules 1 and 8)."""

from __future__ import annotations

import re
from pathlib import Path

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
