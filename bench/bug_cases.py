"""The CASES.md bug-case table: every ``examples/bugs/<id>_{buggy,fixed}.py`` through ``prove``.

For each case prints the verdicts of the buggy and the fixed plan, the first diverging goal of
the buggy plan, the factor (plan / spec, when it is a constant) or the first differing values,
whether the fixed plan's certificate passes ``check-certificate``, the precision-lint verdicts
(``prove --precision-lint``: FLAG or PASS, run on every file, so the column also shows the
lint's false positives), the wall seconds of each proof (load + prove, in this process, one
after the other), their total and the process's peak RSS.

    python bench/bug_cases.py [--cases B01 B03 ...] [--no-certificate] [--json out.json]

Seconds are wall-clock on this machine; the table is the closing-note table of issue 4.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

BUGS = ROOT / "examples" / "bugs"


def _case_ids() -> list[str]:
    ids = {p.name.split("_")[0] for p in BUGS.glob("B*_*.py")}
    return sorted(ids, key=lambda s: int(re.sub(r"\D", "", s) or 0))


def _lint(path: Path) -> str | None:
    from proofs.precision import lint     # prove --precision-lint
    from spec_lang import load
    findings = lint(load(path))
    return "FLAG" if findings else "PASS"


def _run(path: Path, certificate: bool) -> dict:
    from proofs.prover import prove
    from spec_lang import load

    t0 = time.perf_counter()
    report = prove(load(path), timeout_s=300)
    row = {"verdict": report.verdict, "seconds": time.perf_counter() - t0}
    cx = report.counterexample
    if cx is not None:
        row["goal"] = cx.goal
        row["rank"] = cx.rank_text
        parts = []
        if cx.ratio is not None and not cx.hint.startswith("not a simple factor"):
            parts.append(f"{cx.ratio:.3f} x")
        if cx.values:
            el, s, p = cx.values[0]
            parts.append(f"{el.strip()}: spec {s:.6g}, plan {p:.6g}")
        row["factor"] = "; ".join(parts)
    if certificate and report.verdict == "EQUIVALENT":
        from proofs.certificate import certificate_of, write_certificate
        from proofs.checker import check_certificate
        with tempfile.TemporaryDirectory() as tmp:
            cert = Path(tmp) / "cert.json"
            write_certificate(cert, certificate_of(report))
            res = check_certificate(cert, retrace=True, plan_path=path)
            row["certificate"] = "accepted" if res.checked == res.total else "partial"
    row["lint"] = _lint(path)
    return row


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cases", nargs="*", help="case ids (default: every examples/bugs case)")
    ap.add_argument("--no-certificate", action="store_true", help="skip check-certificate")
    ap.add_argument("--json", metavar="OUT", help="also write the rows as JSON")
    a = ap.parse_args(argv)
    from rich.console import Console
    from rich.table import Table

    table = Table(title="CASES.md bug cases")
    for col in ("case", "buggy", "diverging goal", "factor or values", "s", "fixed",
                "certificate", "s ", "lint buggy/fixed"):
        table.add_column(col)
    rows = []
    for case in a.cases or _case_ids():
        buggy, fixed = BUGS / f"{case}_buggy.py", BUGS / f"{case}_fixed.py"
        b = _run(buggy, False) if buggy.exists() else {}
        f = _run(fixed, not a.no_certificate) if fixed.exists() else {}
        rows.append({"case": case, "buggy": b, "fixed": f})
        lint = f"{b.get('lint', '-')}/{f.get('lint', '-')}"
        table.add_row(case, b.get("verdict", "-"), b.get("goal", ""), b.get("factor", ""),
                      f"{b.get('seconds', 0):.2f}", f.get("verdict", "-"),
                      f.get("certificate", ""), f"{f.get('seconds', 0):.2f}", lint)
    Console(width=200).print(table)
    import resource
    total = sum(r[k].get("seconds", 0.0) for r in rows for k in ("buggy", "fixed"))
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"{len(rows)} cases, {2 * len(rows)} plan files: {total:.1f} s of proving, "
          f"peak RSS {rss:.0f} MB")
    if a.json:
        Path(a.json).write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
