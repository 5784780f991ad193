"""The tables of ``bench/verify_scaling.py`` (rich on the console, Markdown for
``docs/scaling.md``) and the figures they compare against: the issue-5 targets and TrainVerify's
published timings (``docs/ANCHORS.md``).

Every function reads the results JSON that ``verify_scaling.py`` writes (``data["results"]``,
one dict per configuration, ``data["runs"]`` the run headers) and computes nothing new.
"""

from __future__ import annotations

import argparse
from typing import Any

TARGET_S = 60.0          # issue 5: each frontier plan proved in <= 60 s ...
TARGET_GB = 8.0          # ... and <= 8 GB on this 2-core machine
FLAT_RATIO = 2.0         # issue 5: dp / tp / micro-batch curves <= 2x from 2 to 1024

# TrainVerify (SOSP'25, arXiv 2506.15961), published artifact timings, copied from
# docs/ANCHORS.md ("TrainVerify ... published artifact timings"; >= 32 vCPUs, 1 TB RAM,
# 30 worker processes; loss = sum(logits), no optimizer step). Their configs are not ours: the
# 405B row is shrunk to hidden 1024, the DeepSeek-like row to hidden 512 with plain attention.
TRAINVERIFY_FRONTIER_S = {
    "llama3_70b": (8532.0, "Llama3-70B 80 layers hidden 4096, dp16 tp8 pp4 mb32"),
    "llama31_405b": (28786.0, "Llama3-405B 126 layers hidden 1024, dp64 tp8 pp16 mb16"),
    "llama31_405b_cp16": (None, "CP is not modelled by TrainVerify"),
    "deepseek_v3": (32371.0, "671B-like MoE 61 layers hidden 512 plain MHA, dp32 tp8 pp8 mb16"),
}
# docs/ANCHORS.md, "Scaling (Llama, 32 layers unless varied)": endpoints of TrainVerify's
# Table 7 curves; batch / hidden / sequence / heads are "flat ~15 s" (shape reduction).
TRAINVERIFY_GRID_S: dict[str, dict[int, float]] = {
    "layers": {4: 143.0, 32: 949.0},
    "dp": {2: 115.0, 64: 3670.0},
    "microbatches": {2: 224.0, 32: 3532.0},
    "tp": {1: 107.0, 8: 875.0},
}
TRAINVERIFY_FLAT_S = 15.0
FLAT_KNOBS = ("batch", "hidden", "sequence", "heads")


class _T:
    """A table printed with rich (the console) or as Markdown (``--markdown``, docs/scaling.md)."""

    def __init__(self, title: str, **_: Any) -> None:
        self.title = title
        self.cols: list[tuple[str, str]] = []
        self.rows: list[tuple[str, ...] | None] = []    # None: a section break

    def add_column(self, name: str, justify: str = "left") -> None:
        self.cols.append((name, justify))

    def add_row(self, *cells: str) -> None:
        self.rows.append(tuple(cells))

    def add_section(self) -> None:
        self.rows.append(None)

    def rich(self) -> Any:
        from rich.table import Table

        t = Table(title=self.title)
        for name, justify in self.cols:
            t.add_column(name, justify=justify)
        for r in self.rows:
            if r is None:
                t.add_section()
            else:
                t.add_row(*r)
        return t

    def markdown(self) -> str:
        out = [f"**{self.title}**", "",
               "| " + " | ".join(n for n, _ in self.cols) + " |",
               "|" + "|".join("---:" if j == "right" else "---" for _, j in self.cols) + "|"]
        out += ["| " + " | ".join(c.replace("|", "/") for c in r) + " |"
                for r in self.rows if r is not None]
        return "\n".join(out) + "\n"


def _f(x: Any, nd: int = 1) -> str:
    return "-" if x is None else f"{x:.{nd}f}"


def _mesh(r: dict[str, Any]) -> str:
    m = r.get("mesh")
    if not m:
        j = r["job"]
        if j["kind"] == "frontier":
            return "-"
        m = {"pp": j["pp"] or 1, "dp": j["dp"], "tp": j["tp"], "mb": j["microbatches"]}
    return " ".join(f"{k}{v}" for k, v in m.items())


def _verdict(r: dict[str, Any]) -> str:
    return r.get("verdict") or r["status"].upper()


def _cut(r: dict[str, Any]) -> str:
    """The number of cuts (layer-boundary cut points) the proof used; 0 = proved uncut."""
    if "lemma_counts" not in r or r.get("status") != "ok":
        return "-"
    return str(r["lemma_counts"].get("cuts", 0))


def _top_phase(r: dict[str, Any]) -> str:
    ph = {k: v for k, v in (r.get("phases_s") or {}).items()}
    if not ph:
        return (r.get("error") or "")[:60]
    k = max(ph, key=ph.get)
    return f"{k} {ph[k]:.1f}"


def frontier_table(data: dict[str, Any], keys: list[str]) -> Any:
    t = _T(title="(a) frontier plans: targets <= 60 s and <= 8 GB each", show_lines=False)
    for c in ("plan", "layers", "mesh", "verdict", "goals", "rewr", "z3", "reused", "open",
              "load s", "prove s", "cert s", "check s", "cert MB", "gz MB", "load+prove s",
              "peak GB", "target",
              "TrainVerify s", "load1", "tree"):
        t.add_column(c, justify="left" if c in ("plan", "mesh", "verdict", "tree") else "right")
    for k in keys:
        r = data["results"].get(k)
        if r is None or r["job"]["kind"] != "frontier":
            continue
        j = r["job"]
        c = r.get("counts") or {}
        tv, _ = TRAINVERIFY_FRONTIER_S[j["name"]]
        gb = r.get("peak_rss_mb", 0) / 1024 if r.get("peak_rss_mb") else None
        tot = r.get("total_s")
        if r["status"] == "ok" and tot is not None:
            ok = (tot <= TARGET_S and gb is not None and gb <= TARGET_GB
                  and r.get("verdict") == "EQUIVALENT" and r.get("cert_ok", True))
            target = "yes" if ok else "NO"
        else:
            target = "-"
        t.add_row(j["name"], str(j["depth"] or "full"), _mesh(r), _verdict(r),
                  *(str(c.get(x, "-")) for x in ("total", "rewrite", "smt", "reused", "open")),
                  _f(r.get("load_s")), _f(r.get("prove_s")), _f(r.get("cert_write_s")),
                  (_f(r.get("cert_check_s")) + ("" if r.get("cert_ok", True) else " REJ"))
                  if "cert_check_s" in r else "-",
                  _f(r.get("cert_mb")), _f(r.get("cert_gz_mb"), 2),
                  _f(tot), _f(gb, 2), target, "-" if tv is None else f"{tv:,.0f}",
                  _f((r.get("loadavg_before") or [None])[0], 2), r.get("commit", "?"))
    return t


def phase_table(data: dict[str, Any], keys: list[str], title: str) -> _T:
    """Per-phase seconds (load, then ``Report.seconds``) of the rows that have them."""
    rows = [data["results"][k] for k in keys if (data["results"].get(k) or {}).get("phases_s")]
    t = _T(title)
    phases: list[str] = []
    for r in rows:
        phases += [p for p in r["phases_s"] if p not in phases]
    t.add_column("configuration")
    for p in ["load"] + phases:
        t.add_column(p, justify="right")
    prev = None
    for r in rows:
        j = r["job"]
        name = j["name"] if j["kind"] == "frontier" else f"{j['knob']}={j['value']}"
        if j["kind"] == "grid" and prev is not None and j["knob"] != prev:
            t.add_section()
        prev = j.get("knob")
        t.add_row(name, _f(r.get("load_s"), 2), *(_f(r["phases_s"].get(p), 2) for p in phases))
    return t


# issue 14's target: every phase flat in depth, <= 1.5x from 4 to 126 layers
DEPTH_FLAT = 1.5


def depth_tables(data: dict[str, Any], keys: list[str]) -> list[_T]:
    """The depth curve of each frontier plan run at two or more depths (issue 14 item 5):
    one row per phase (``load`` = tracing the plan, the prover's ``Report.seconds``, ``cert``
    write, ``check``, and ``total`` = their sum), one column per depth, then last / first
    (``FLAT`` when <= 1.5x, else ``GROWS``)."""
    by_plan: dict[str, dict[int, dict[str, Any]]] = {}
    for k in keys:
        r = data["results"].get(k) or {}
        j = r.get("job") or {}
        if j.get("kind") == "frontier" and j.get("depth") and r.get("status") == "ok":
            by_plan.setdefault(j["name"], {})[int(j["depth"])] = r
    out = []
    for name, runs in by_plan.items():
        if len(runs) < 2:
            continue
        depths = sorted(runs)
        rows: dict[str, dict[int, float]] = {}
        for d in depths:
            r = runs[d]
            cells = {"load": r.get("load_s"), **(r.get("phases_s") or {}),
                     "cert": r.get("cert_write_s"), "check": r.get("cert_check_s")}
            cells = {p: float(v) for p, v in cells.items() if v is not None}
            cells["total"] = sum(cells.values())
            for p, v in cells.items():
                rows.setdefault(p, {})[d] = v
        t = _T(f"depth curve: {name}, seconds per phase at {len(depths)} depths (layers)")
        t.add_column("phase")
        for d in depths:
            t.add_column(str(d), justify="right")
        t.add_column(f"{depths[-1]}/{depths[0]}", justify="right")
        t.add_column("flat <= 1.5x")
        for p, v in rows.items():
            first, last = v.get(depths[0]), v.get(depths[-1])
            ratio = last / first if first and last is not None and first > 0.05 else None
            verdict = "-" if ratio is None else ("FLAT" if ratio <= DEPTH_FLAT else "GROWS")
            t.add_row(p, *(_f(v.get(d), 2) for d in depths), _f(ratio, 2), verdict)
        out.append(t)
    return out


def _tv_grid(knob: str, value: int) -> str:
    if knob in FLAT_KNOBS:
        return f"~{TRAINVERIFY_FLAT_S:.0f}"
    v = TRAINVERIFY_GRID_S.get(knob, {}).get(value)
    return "-" if v is None else f"{v:,.0f}"


def grid_table(data: dict[str, Any], keys: list[str], title: str) -> Any:
    t = _T(title=title)
    for c in ("knob", "value", "L", "mesh", "B", "verdict", "goals", "cuts", "load s", "prove s",
              "load+prove s", "peak MB", "largest phase s", "TrainVerify s", "load1", "tree"):
        t.add_column(c, justify="left" if c in ("knob", "mesh", "verdict", "largest phase s",
                                                "tree")
                     else "right")
    prev = None
    for k in keys:
        r = data["results"].get(k)
        if r is None or r["job"]["kind"] != "grid":
            continue
        j = r["job"]
        if prev is not None and j["knob"] != prev:
            t.add_section()
        prev = j["knob"]
        t.add_row(j["knob"], str(j["value"]), str(j["n_layers"]), _mesh(r),
                  str(j["dp"] * j["microbatches"] * j["micro_batch_size"]),
                  _verdict(r), str((r.get("counts") or {}).get("total", "-")), _cut(r),
                  _f(r.get("load_s")), _f(r.get("prove_s")), _f(r.get("total_s")),
                  _f(r.get("peak_rss_mb"), 0), _top_phase(r), _tv_grid(j["knob"], j["value"]),
                  _f((r.get("loadavg_before") or [None])[0], 2), r.get("commit", "?"))
    return t


def knob_summary(data: dict[str, Any], keys: list[str]) -> list[dict[str, Any]]:
    """Per knob: the range, our max/min seconds, the phase that grows most, TrainVerify's."""
    by: dict[str, list[dict[str, Any]]] = {}
    for k in keys:
        r = data["results"].get(k)
        if r is not None and r["job"]["kind"] == "grid":
            by.setdefault(r["job"]["knob"], []).append(r)
    out = []
    for knob, rows in by.items():
        ok = [r for r in rows if r.get("total_s") is not None and r["status"] == "ok"]
        bad = [r for r in rows if r not in ok]
        s = {"knob": knob, "values": [r["job"]["value"] for r in rows],
             "failed": [f"{r['job']['value']}: {_verdict(r)}" for r in bad]}
        if ok:
            lo = min(ok, key=lambda r: r["total_s"])
            hi = max(ok, key=lambda r: r["total_s"])
            s.update(min_s=lo["total_s"], max_s=hi["total_s"], max_at=hi["job"]["value"],
                     ratio=hi["total_s"] / lo["total_s"] if lo["total_s"] else float("inf"),
                     rss_ratio=max(r["peak_rss_mb"] for r in ok) / min(r["peak_rss_mb"] for r in ok))
            first, last = ok[0], ok[-1]
            grow = {}
            for ph in set(first.get("phases_s", {})) | set(last.get("phases_s", {})) | {"load"}:
                a0 = first["load_s"] if ph == "load" else first.get("phases_s", {}).get(ph, 0.0)
                a1 = last["load_s"] if ph == "load" else last.get("phases_s", {}).get(ph, 0.0)
                grow[ph] = (a0, a1)
            top = sorted(grow.items(), key=lambda kv: kv[1][1] - kv[1][0], reverse=True)[:2]
            s["growth"] = [f"{ph} {a0:.1f}->{a1:.1f}" for ph, (a0, a1) in top if a1 - a0 > 0.3]
        s["flag"] = bool(bad) or s.get("ratio", 0) > FLAT_RATIO
        tv = TRAINVERIFY_GRID_S.get(knob)
        if tv:
            (v0, t0), (v1, t1) = sorted(tv.items())
            s["trainverify"] = f"{v0}->{v1}: {t0:,.0f}->{t1:,.0f} s ({t1 / t0:.1f}x)"
        elif knob in FLAT_KNOBS:
            s["trainverify"] = f"flat ~{TRAINVERIFY_FLAT_S:.0f} s"
        out.append(s)
    return out


def summary_table(summ: list[dict[str, Any]]) -> Any:
    t = _T(title=f"(b) per knob: max/min of our load+prove seconds (flag > {FLAT_RATIO:.0f}x "
                    f"or any failed point)")
    for c in ("knob", "range", "min s", "max s (at)", "max/min", "flag", "peak RSS max/min",
              "growing phases (first->last point, s)", "TrainVerify (ANCHORS.md)", "failed"):
        t.add_column(c, justify="right" if c in ("min s", "max s (at)", "max/min") else "left")
    for s in summ:
        t.add_row(s["knob"], f"{s['values'][0]}..{s['values'][-1]}", _f(s.get("min_s")),
                  _f(s.get("max_s")) + (f" ({s['max_at']})" if "max_at" in s else ""),
                  _f(s.get("ratio"), 2) + ("x" if "ratio" in s else ""),
                  "FLAG" if s["flag"] else "flat", _f(s.get("rss_ratio"), 2),
                  ", ".join(s.get("growth", [])) or "-", s.get("trainverify", "-"),
                  "; ".join(s["failed"]) or "-")
    return t


def render(data: dict[str, Any], keys: list[str], console: Any, a: argparse.Namespace) -> None:
    """Print the header and the tables of the results ``keys`` (rich, or Markdown)."""
    def emit(x: Any) -> None:
        if a.markdown:
            print(x.markdown() if isinstance(x, _T) else x + "\n")
        else:
            console.print(x.rich() if isinstance(x, _T) else x)

    h = data["runs"][-1]
    la = h["loadavg"]
    emit(f"shardproof verify_scaling, commit {h['commit']}, {h['started']}, "
         f"{h['cpus']} cores shared with other agents: loadavg {la[0]:.2f} {la[1]:.2f} "
         f"{la[2]:.2f} at start" + (f", {h['loadavg_end'][0]:.2f} at end"
                                   if "loadavg_end" in h else "")
         + ". Column load1: the 1-min loadavg before each row (above ~1.5 other processes "
           "shared the 2 cores, so that row's seconds are inflated); column tree: the commit "
           "it ran at (+N: N uncommitted product files in the shared tree).")
    emit(f"jobs={h['jobs']}, address-space limit {h['mem_limit_gb']} GB per configuration, "
         f"timeout {h['timeout_s']:.0f} s, "
         + ("in-process (peak RSS is the bench process's cumulative peak)"
            if h["in_process"] else "a fresh subprocess per configuration"))
    fk = [k for k in keys if k.startswith("frontier:")]
    if fk:
        depth = (f"reduced depth {', '.join(map(str, a.depth))} layers" if a.depth
                 else "full depth")
        emit(f"(a) frontier plans at {depth}; load+prove excludes the certificate "
             f"(cert s = write, check s = check-certificate"
             f"{', re-tracing the plan file' if not a.depth else ', no re-trace'}); "
             f"TrainVerify s: their published time for that model, on their (shrunk) config.")
        emit(frontier_table(data, fk))
        if any((data["results"].get(k) or {}).get("phases_s") for k in fk):
            emit(phase_table(data, fk, "(a) per-phase seconds (load, then Report.seconds)"))
        for curve in depth_tables(data, fk):
            emit(curve)
        for k in fk:
            r = data["results"].get(k, {})
            if r.get("status") != "ok" or r.get("open_reasons"):
                why = [r["error"]] if r.get("error") else []
                if r.get("open_reasons"):
                    why.append("open: " + " | ".join(r["open_reasons"]))
                emit(f"  {r['job']['name']}: " + "; ".join(why))
    gk = [k for k in keys if k.startswith("grid:")]
    if gk:
        model = "debug Llama (spec_lang.models.DEBUG)" if a.quick else \
            "Llama-3-8B widths (LLAMA3_8B)"
        base = "dp 2 x tp 2 x 2 mb" if a.quick else \
            f"dp 4 x tp 8 x 4 mb, micro-batch size {a.micro_batch_size}"
        emit(f"(b) Table 7 grid: {model}, {'1' if a.quick else a.layers} layers for the "
             f"non-layer knobs (column L), base {base}; one knob varied at a time. Plan: "
             f"examples/llama3_8b_megatron.py build() (Megatron TP x DP x micro-batches); knob "
             f"pp: megatron_3d (TP x PP x DP, 1F1B). tp <= 8: 8 KV heads, the plan shards KVH. "
             f"B = global batch (sequences). TrainVerify's seconds: >= 32 vCPUs, the endpoints "
             f"docs/ANCHORS.md gives.")
        emit(grid_table(data, gk, "(b) Table 7 grid"))
        emit(summary_table(knob_summary(data, gk)))
        pk = [k for k in gk if data["results"][k]["job"]["knob"] in ("dp", "microbatches", "tp")]
        if pk:
            emit(phase_table(data, pk, "(b) per-phase seconds of the dp, micro-batch and tp "
                                       "curves"))
