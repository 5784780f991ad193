"""Coq coverage and cost per example (issue 17, docs/coq.md).

For each example plan: prove it with a certificate (``prove --certificate`` in a child process) (or read one given with ``--certificate``),
export the certificate to Coq and run coqc on it (``proofs.coq_run.coq_check``), and print the
obligations Coq-checked (no hypothesis), those proved under hypotheses (claims), those not
Coq-checked, the rule / smt / cas steps checked by Coq lemmas, the steps exported as hypotheses
(rules without a lemma, smt, cas), the steps Coq rejected, the library build and coqc seconds
(wall clock, this machine; and coqc's CPU seconds, which a shared machine inflates less) and
coqc's peak RSS. coqc runs one at a time, under the address-space
limit of ``SHARDPROOF_COQ_MEMORY_GB`` (default 6).

    python bench/coq_check.py [examples/llama_debug_dp.py ...] [--certificate CERT.json]
                              [--json out.json]

Default examples: ``examples/llama_debug_dp.py`` and ``examples/llama3_8b_megatron.py``.
"""

from __future__ import annotations

import argparse
import collections
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

DEFAULT = ["examples/llama_debug_dp.py", "examples/llama3_8b_megatron.py"]


def _certificate(plan: str, out: Path) -> tuple[dict, float]:
    """``prove PLAN --certificate OUT --no-check`` in a child process (the plan is user code)."""
    t0 = time.monotonic()
    subprocess.run([sys.executable, "-m", "proofs.cli", "prove", str(ROOT / plan),
                    "--certificate", str(out), "--no-check"], check=True, cwd=ROOT,
                   stdout=subprocess.DEVNULL)
    return json.loads(out.read_text()), time.monotonic() - t0


def row(label: str, cert: dict) -> dict:
    from proofs.coq_run import coq_check
    r = coq_check(cert, label=label)
    ex = r.export
    st = collections.Counter(r.status.values())
    return {
        "example": label, "nodes": ex.nodes, "steps": ex.steps, "words": ex.words,
        "obligations": len(r.status), "coq_checked": st["checked"], "under_claims": st["claims"],
        "not_checked": st["not checked"],
        "rule_steps_coq": r.rule_steps_checked,
        "steps_as_hypotheses": len(ex.opaque), "steps_rejected": len(r.failed_steps),
        "rejected_kinds": dict(collections.Counter(
            cert["steps"][k]["kind"] for k in r.failed_steps)),
        "hypothesis_rules": dict(collections.Counter(ex.opaque.values()).most_common(8)),
        "seconds": {k: round(v, 1) for k, v in r.seconds.items()},
        "peak_rss_mb": round(r.peak_rss_mb), "axioms": r.axioms,
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("plans", nargs="*", default=None)
    ap.add_argument("--certificate", action="append", default=[],
                    help="a certificate to check instead of proving (repeatable)")
    ap.add_argument("--json")
    a = ap.parse_args()
    rows = []
    for c in a.certificate:
        rows.append(row(c, json.loads(Path(c).read_text())))
    with tempfile.TemporaryDirectory() as tmp:
        for plan in (a.plans or ([] if a.certificate else DEFAULT)):
            cert, secs = _certificate(plan, Path(tmp) / "cert.json")
            rows.append(row(plan, cert) | {"prove_seconds": round(secs, 1)})
            print(json.dumps(rows[-1]), flush=True)
    for r in rows:
        print(f"{r['example']}: {r['coq_checked']}/{r['obligations']} obligations Coq-checked "
              f"({r['under_claims']} under claims); {r['rule_steps_coq']} rule steps by Coq "
              f"lemmas, {r['steps_as_hypotheses']} steps as hypotheses, {r['steps_rejected']} "
              f"rejected; {r['nodes']} nodes, {r['steps']} steps; library "
              f"{r['seconds']['library']} s, coqc {r['seconds']['coqc']} s "
              f"({r['seconds']['coqc_cpu']} s CPU), peak RSS "
              f"{r['peak_rss_mb']} MB")
    if a.json:
        Path(a.json).write_text(json.dumps(rows, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
