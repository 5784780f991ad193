"""Adversarial round 52b: ``check-certificate CERT --plan PLAN``'s speculative re-trace
(``proofs.retrace.speculative_retrace``) and DeepSeek-V3's per-layer balance-loss cut
(``layers.N.moe.aux``). Findings and attempts: tests/adversarial/ATTEMPTS.md, "Round 52b"."""

from __future__ import annotations

import gzip
import hashlib
import importlib.util
import json
import os
import shutil
import signal
import time
from pathlib import Path

import pytest

from proofs.checker import check_certificate
from proofs.errors import CertificateError, MalformedCertificate
from proofs.retrace import EarlyRetrace, speculative_retrace
from tests.adversarial.forge import certificate, certificates_in, children

ROOT = Path(__file__).resolve().parents[2]
PLAN = ROOT / "examples" / "llama_debug_dp.py"
PLANS = Path(__file__).resolve().parent / "plans" / "round52b"
OTHER = PLAN.read_text().replace("dp=4, microbatches=2", "dp=2, microbatches=2")

NO_SPEC_LANG_TEXT = '''"""Round 52b: a DSL plan whose text never names its package."""
import dataclasses
import importlib

_sl = importlib.import_module("spec" + "_lang")
_models = importlib.import_module("spec" + "_lang.models")
_plans = importlib.import_module("spec" + "_lang.plans")
model = _models.llama(dataclasses.replace(_models.DEBUG, batch=8))
spec = model.spec(_sl.AdamW())
plan = _plans.megatron(model, tp=1, dp=4, microbatches=2)
'''


@pytest.fixture(scope="module")
def work(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("r52b")
    certificates_in(d, {"plan.py": PLAN, "ns.py": NO_SPEC_LANG_TEXT})
    return d


def _procs_named(arg: str) -> list[int]:
    out = []
    for p in Path("/proc").iterdir():
        if p.name.isdigit():
            try:
                if arg.encode() in (p / "cmdline").read_bytes().split(b"\0"):
                    out.append(int(p.name))
            except OSError:
                pass
    return out


def _vouch(path: Path) -> str:
    """A text naming ``path``'s sha256 as a certificate does (the speculative re-trace starts
    only for such a text since R52b-1's fix)."""
    return '{"plan":{"sha256":"%s"}}' % hashlib.sha256(path.read_bytes()).hexdigest()


def test_r52b_a1_honest_guess_then_the_file_becomes_another_plan(work, monkeypatch):
    """A1 (TOCTOU): guess traced on the certified bytes, file replaced before adopt: hash."""
    monkeypatch.chdir(work)
    shutil.copy(work / "plan.py", work / "t1.py")
    cert = json.loads((work / "plan.json").read_text())
    early = speculative_retrace("t1.py", (work / "plan.json").read_text(), 60)
    (work / "t1.py").write_text(OTHER)
    with pytest.raises(CertificateError, match="does not hash to plan.sha256"):
        early.adopt(cert, work / "plan.json", "t1.py")
    assert early.pending.proc.poll() is not None


def test_r52b_a2_wrong_bytes_guessed_then_the_certified_bytes_are_not_adopted(work, monkeypatch):
    """A2 (TOCTOU): guess traced on another plan, the file then gets the certified bytes: the
    guess is dropped and the certificate's bytes re-traced."""
    monkeypatch.chdir(work)
    (work / "plan2.py").write_text(OTHER)
    cert = json.loads((work / "plan.json").read_text())
    cert["plan"]["path"] = "plan2.py"
    early = speculative_retrace("plan2.py", _vouch(work / "plan2.py"), 60)
    shutil.copy(work / "plan.py", work / "plan2.py")
    fresh = early.adopt(cert, work / "plan.json", "plan2.py")
    try:
        assert not isinstance(fresh, EarlyRetrace)
        assert early.pending.proc.poll() is not None
    finally:
        fresh.cancel()


def test_r52b_a3_symlink_swapped_between_guess_and_adopt(work, monkeypatch):
    """A3: PLAN a symlink to another plan at the guess, to the certified one at adopt."""
    monkeypatch.chdir(work)
    (work / "other.py").write_text(OTHER)
    link = work / "link.py"
    link.symlink_to(work / "other.py")
    cert = json.loads((work / "plan.json").read_text())
    cert["plan"]["path"] = "link.py"
    early = speculative_retrace("link.py", _vouch(link), 60)
    link.unlink()
    link.symlink_to(work / "plan.py")
    fresh = early.adopt(cert, work / "plan.json", "link.py")
    try:
        assert not isinstance(fresh, EarlyRetrace)
    finally:
        fresh.cancel()


@pytest.mark.parametrize("given", ["./plan.py", "ABS"])
def test_r52b_a4_other_spellings_of_the_path_are_accepted(work, monkeypatch, given):
    """A4: ``./plan.py`` or the absolute path where the certificate says ``plan.py``: the guess
    is not adopted (another name) and the fresh re-trace accepts."""
    monkeypatch.chdir(work)
    res = check_certificate(work / "plan.json", plan_path=str(work / "plan.py") if given == "ABS"
                            else given)
    assert res.verdict == "EQUIVALENT" and res.retraced


def test_r52b_a5_forged_front_end_is_rejected(work, monkeypatch, tmp_path):
    """A5: ``plan.frontend`` forged to torch on a DSL certificate."""
    monkeypatch.chdir(work)
    cert = json.loads((work / "plan.json").read_text())
    cert["plan"]["frontend"] = "torch"
    (tmp_path / "fe.json").write_text(json.dumps(cert))
    with pytest.raises(CertificateError, match="no longer traces"):
        check_certificate(tmp_path / "fe.json", plan_path="plan.py")


def test_r52b_a6_dsl_plan_without_the_text_spec_lang(work, monkeypatch):
    """A6: the guess is torch (no ``spec_lang`` in the bytes); the fresh DSL re-trace accepts."""
    monkeypatch.chdir(work)
    early = speculative_retrace("ns.py", (work / "ns.json").read_text(), 60)
    early.cancel()
    assert early.frontend == "torch"
    res = check_certificate(work / "ns.json", plan_path="ns.py")
    assert res.verdict == "EQUIVALENT" and res.retraced


@pytest.mark.parametrize("kind", ["not_json", "bad_gzip", "gzip_not_cert", "empty"])
def test_r52b_a7_bad_certificates_leave_no_child(work, tmp_path, kind):
    """A7: a malformed or gzip certificate with --plan: MalformedCertificate, no child left."""
    p = tmp_path / ("c.json.gz" if "gzip" in kind else "plan.json")
    if kind == "not_json":
        p.write_text("{not json")
    elif kind == "bad_gzip":
        p.write_bytes(b"\x1f\x8b\x08\x00garbage")
    elif kind == "gzip_not_cert":
        p.write_bytes(gzip.compress(b'{"format": "x"}'))
    else:
        p.write_bytes(b"")
    before = children()
    with pytest.raises(MalformedCertificate):
        check_certificate(p, plan_path=work / "plan.py")
    assert children() - before == set()


FORKER = '''import os
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        os.execvp("sleep", ["sleep", "52.%d"])
    os._exit(0)
''' + PLAN.read_text()


def test_r52b_1_a_non_certificate_does_not_run_the_plan(tmp_path):
    """R52b-1 (fixed: the early re-trace starts only for a text naming the plan's sha256):
    ``check-certificate NOT_A_CERT --plan PLAN`` does not execute PLAN."""
    tag = f"52.{os.getpid() % 100000}"
    (tmp_path / "p.py").write_text(FORKER % (os.getpid() % 100000))
    big = tmp_path / "big.json"
    big.write_text('{"format": "x", "pad": [' + ",".join(["1"] * 2_000_000) + "]}")
    try:
        with pytest.raises(MalformedCertificate):
            check_certificate(big, plan_path=tmp_path / "p.py")
        time.sleep(0.3)
        assert _procs_named(tag) == []
    finally:
        for pid in _procs_named(tag):
            os.kill(pid, signal.SIGKILL)


def _mutants():
    s = importlib.util.spec_from_file_location("r52b_ds", PLANS / "ds_aux_mutants.py")
    m = importlib.util.module_from_spec(s)
    s.loader.exec_module(m)
    return m


@pytest.mark.parametrize("mutant", [   # two in the default suite (its budget, stop 55)
    pytest.param(m, marks=() if m in ("alpha2", "mtp_aux_dropped") else pytest.mark.slow)
    for m in ["alpha2", "local_mean", "local_mean_one", "mtp_aux_dropped", "mtp_aux_doubled",
              "biased_topk_one", "swap_first_two", "probs_stopgrad_one"]])
def test_r52b_a8_deepseek_balance_loss_mutants_are_refuted(mutant):
    """A8: asymmetric balance-loss mutants around the ``layers.N.moe.aux`` cut (debug size)."""
    from proofs.prover import prove
    from spec_lang import build_problem

    report = prove(build_problem(*_mutants().build(mutant)), timeout_s=120)
    assert report.verdict == "NOT EQUIVALENT", (mutant, report.verdict)


@pytest.mark.slow
def test_r52b_a9_swapped_boundary_names_stay_equivalent():
    """A9: layers 1 and 2's aux boundary names swapped, values right: EQUIVALENT (~3 s)."""
    from proofs.prover import prove
    from spec_lang import build_problem

    report = prove(build_problem(*_mutants().build("swap_names")), timeout_s=120)
    assert report.verdict == "EQUIVALENT"


@pytest.mark.slow
def test_r52b_a10_deepseek_v3_aux_cut_forgeries(tmp_path, monkeypatch):
    """A10: DeepSeek-V3's certificate with one ``moe.aux`` cut's premise, embed, var or spec /
    plan nodes taken from another layer's cut: rejected (~17 s prove, ~5 s per check)."""
    shutil.copy(ROOT / "examples" / "deepseek_v3.py", tmp_path / "ds.py")
    monkeypatch.chdir(tmp_path)
    c = certificate(Path("ds.py"), tmp_path / "ds.json")
    nodes, steps = c["nodes"], c["steps"]
    aux = [(i, j, nodes[ct["var"]][2][0]) for i, s in enumerate(steps) if s["kind"] == "cut"
           for j, ct in enumerate(s["cuts"]) if "moe.aux" in nodes[ct["var"]][2][0]]
    i, j, name = aux[-1]
    src = next(a for a in aux if a[0] < i and a[2] != name)
    oc, ct = steps[src[0]]["cuts"][src[1]], steps[i]["cuts"][j]
    for upd in ({"premise": oc["premise"]}, {"embed": nodes[ct["embed"]][1][0]},
                {"var": oc["var"]}, {"spec": oc["spec"], "plan": oc["plan"]}):
        d = json.loads(json.dumps(c))
        d["steps"][i]["cuts"][j].update(upd)
        (tmp_path / "f.json").write_text(json.dumps(d))
        with pytest.raises(CertificateError):
            check_certificate(tmp_path / "f.json", plan_path="ds.py")
