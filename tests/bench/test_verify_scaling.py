"""Smoke test of bench/verify_scaling.py: the quick grid's rows and verdicts (never timings),
the JSON file (atomic, resumable) and the frontier rows' ``missing`` status."""

import argparse
import contextlib
import importlib.util
import io
import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def bench():
    spec = importlib.util.spec_from_file_location("verify_scaling", ROOT / "bench" /
                                                  "verify_scaling.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules["verify_scaling"] = mod
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="module")
def quick(bench, tmp_path_factory):
    """One quick run (2 points per knob on the debug Llama), its JSON and its printed table."""
    out = tmp_path_factory.mktemp("scaling") / "quick.json"
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        code = bench.main(["--quick", "--json", str(out), "--width", "240"])
    return code, json.loads(out.read_text()), buf.getvalue()


@pytest.mark.slow   # ~16 s of set-up (CI is at its 10-minute budget; `-m slow` runs it)
def test_quick_grid_rows_and_verdicts(bench, quick):
    code, data, text = quick
    assert code == 0
    rows = list(data["results"].values())
    got = sorted((r["job"]["knob"], r["job"]["value"]) for r in rows)
    want = sorted((p["knob"], p["value"]) for p in bench._grid_points(True, 1))
    assert got == want and len(got) == 2 * len(bench.KNOBS)
    assert {r["verdict"] for r in rows} == {"EQUIVALENT"}
    assert all(r["status"] == "ok" and r["counts"]["open"] == 0 for r in rows)
    # the varied knob reaches the traced problem: mesh sizes and layer count
    by = {(r["job"]["knob"], r["job"]["value"]): r for r in rows}
    assert by[("dp", 4)]["mesh"]["dp"] == 4 and by[("dp", 2)]["mesh"]["dp"] == 2
    assert by[("tp", 1)]["mesh"]["tp"] == 1 and by[("tp", 2)]["mesh"]["tp"] == 2
    assert by[("microbatches", 4)]["mesh"]["mb"] == 4
    assert by[("pp", 2)]["mesh"]["pp"] == 2 and "pp" not in by[("dp", 2)]["mesh"]
    assert by[("layers", 2)]["counts"]["total"] > by[("layers", 1)]["counts"]["total"]
    # one row per configuration in the printed table, and the per-knob summary
    for knob in bench.KNOBS:
        assert sum(line.startswith(f"│ {knob} ") for line in text.splitlines()) == 3  # 2 + summary
    assert "(b) per knob" in text and "loadavg" in text
    assert data["runs"][-1]["mode"] == "quick" and len(data["runs"][-1]["loadavg"]) == 3


def test_resume_skips_and_missing_frontier(bench, tmp_path, monkeypatch):
    path = tmp_path / "r.json"     # the quick grid's dp and tp rows only (the suite's time)
    with contextlib.redirect_stdout(io.StringIO()):
        assert bench.main(["--quick", "--json", str(path), "--only", "dp", "tp"]) == 0
    data = json.loads(path.read_text())
    assert len(data["results"]) == 4 and {r["verdict"] for r in data["results"].values()} == {
        "EQUIVALENT"}
    ran = []
    monkeypatch.setattr(bench, "run_one", lambda p, *a: ran.append(p) or {"status": "ok"})
    monkeypatch.setattr(bench, "FRONTIER", {"nowhere": ("examples/does_not_exist.py", "x")})
    monkeypatch.setitem(bench.TRAINVERIFY_FRONTIER_S, "nowhere", (None, ""))
    code = bench.main(["--quick", "--part", "all", "--json", str(path), "--resume",
                       "--only", "dp", "tp", "--width", "200"])
    assert code == 0 and ran == []            # every grid row already in the file
    # --quick skips the frontier part; a full run reports a missing file as "missing"
    code = bench.main(["--part", "frontier", "--json", str(path), "--width", "200"])
    after = json.loads(path.read_text())
    assert code == 0 and ran == []
    assert after["results"]["frontier:nowhere:depthfull"]["status"] == "missing"
    assert len(after["results"]) == len(data["results"]) + 1
    assert not list(tmp_path.glob("*.tmp"))   # atomic writes leave no temporary file


def test_frontier_row_certified_from_a_snapshot(bench, tmp_path, monkeypatch):
    """A frontier row: traced from a snapshot of the plan file, proved, certificate written
    and accepted by the checker with the plan re-traced (full depth = the module-level plan)."""
    monkeypatch.setattr(bench, "FRONTIER", {"debug3d": ("examples/llama_debug_megatron_3d.py",
                                                        "debug Llama tp2 pp2 dp2")})
    monkeypatch.setitem(bench.TRAINVERIFY_FRONTIER_S, "debug3d", (None, ""))
    path = tmp_path / "f.json"
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        code = bench.main(["--part", "frontier", "--in-process", "--json", str(path),
                           "--width", "240"])
    r = json.loads(path.read_text())["results"]["frontier:debug3d:depthfull"]
    assert code == 0 and r["status"] == "ok" and r["verdict"] == "EQUIVALENT"
    assert r["mesh"] == {"pp": 2, "dp": 2, "tp": 2, "mb": 2}
    assert r["cert_ok"] is True and r["cert_retrace"] is True, r.get("cert_check")
    assert r["counts"]["open"] == 0 and r["counts"]["total"] > 0
    assert set(r["phases_s"]) >= {"reduce", "rewrite", "verdict"}
    assert "│ debug3d " in buf.getvalue()


def test_depth_curve_jobs_and_table(bench):
    """``--depth 4 16 126``: one frontier job per depth; the depth curve gives last / first per
    phase, FLAT at <= 1.5x (issue 14 item 5). The results are made up, the arithmetic is not."""
    a = argparse.Namespace(
        part="frontier", only=["llama31_405b"], depth=[4, 16, 126], quick=False, layers=32,
        micro_batch_size=1)
    keys = [k for k, _ in bench._jobs_to_run(a)]
    assert keys == ["frontier:llama31_405b:depth4", "frontier:llama31_405b:depth16",
                    "frontier:llama31_405b:depth126"]
    st = sys.modules["scaling_tables"]      # imported by the bench module (its sibling)

    def row(depth, load, cut, check):
        return {"status": "ok", "load_s": load, "phases_s": {"cut": cut, "rewrite": 0.5},
                "cert_write_s": 1.0, "cert_check_s": check,
                "job": {"kind": "frontier", "name": "llama31_405b", "depth": depth}}
    data = {"results": {keys[0]: row(4, 2.0, 1.0, 3.0), keys[1]: row(16, 2.5, 4.0, 3.1),
                        keys[2]: row(126, 2.8, 14.5, 3.3)}}
    (t,) = st.depth_tables(data, keys)
    md = t.markdown()
    assert "| cut | 1.00 | 4.00 | 14.50 | 14.50 | GROWS |" in md, md
    assert "| load | 2.00 | 2.50 | 2.80 | 1.40 | FLAT |" in md, md
    # total = load + cut + rewrite + cert + check: 7.5 -> 22.1
    assert "| total | 7.50 | 11.10 | 22.10 | 2.95 | GROWS |" in md, md
    assert st.depth_tables(data, keys[:1]) == []      # one depth: no curve
