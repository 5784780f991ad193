"""The checker's trusted base is what ``docs/trusted-base.md`` lists, and nothing evaluates text.

``check-certificate`` runs in fresh interpreters on certificates that exercise every path (rule,
smt and cas steps without a plan; a re-trace of an EQUIVALENT plan; a NOT EQUIVALENT replay; a
re-trace with dropout records): the project modules imported are a subset of the documented
list in each run and, over all runs, exactly the list. Neither egglog, ``rewriting``, the prover,
the DSL's tracer nor torch is ever imported.
"""

from __future__ import annotations

import ast
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from proofs.certificate import certificate_of, write_certificate
from proofs.cli import prove_main
from proofs.prover import prove
from spec_lang.term import DimSpec, Op, term
from terms import add, inp, mul, problem

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "trusted-base.md"
PROJECT = ("proofs", "spec_lang", "rewriting", "simulator", "trainer")
FORBIDDEN = ("egglog", "rewriting", "torch", "proofs.prover", "proofs.normal", "proofs.cut",
             "proofs.certificate", "spec_lang.iteration", "spec_lang.ops", "spec_lang.autodiff",
             "spec_lang.tensor", "spec_lang.pipeline", "spec_lang.models", "spec_lang.plans")


def _documented() -> set[str]:
    text = DOC.read_text()
    section = text.split("## The checker's process", 1)[1].split("\n## ", 1)[0]
    return set(re.findall(r"^\| `([a-z_/]+\.py)` \|", section, re.M))


def _file_of(module: str) -> str:
    path = module.replace(".", "/")
    return path + "/__init__.py" if (ROOT / path).is_dir() else path + ".py"


def _imported_by_check(cert: Path, *flags: str) -> tuple[int, set[str], str]:
    code = ("import sys, json\n"
            "from proofs.cli import check_main\n"
            f"rc = check_main([{str(cert)!r}, *{list(flags)!r}])\n"
            "sys.stderr.write('MODULES ' + json.dumps(sorted(sys.modules)) + '\\n')\n"
            "sys.exit(rc)\n")
    r = subprocess.run([sys.executable, "-c", code], cwd=cert.parent, capture_output=True,
                       text=True, env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
                       timeout=600)
    line = next(x for x in r.stderr.splitlines() if x.startswith("MODULES "))
    mods = json.loads(line[len("MODULES "):])
    bad = [m for m in mods if any(m == f or m.startswith(f + ".") for f in FORBIDDEN)]
    assert not bad, bad
    return r.returncode, {_file_of(m) for m in mods if m.split(".")[0] in PROJECT}, r.stdout


def _smt_cas_problem():
    y, z, w = inp("y", "B"), inp("z", "B"), inp("w", "B")
    mx = lambda a, b: term(Op.MAXIMUM, (a, b), (), (DimSpec("B"),))  # noqa: E731
    return problem([("grad:w", "grad", mul(w, mx(y, z)), mul(mx(z, y), w)),              # smt
                    ("grad:w3", "grad", mul(y, add(z, w)), add(mul(y, z), mul(y, w)))],  # cas
                   {"B": 4, "dp": 2})


@pytest.fixture(scope="module")
def certificates(tmp_path_factory):
    d = tmp_path_factory.mktemp("base")
    tiny = (ROOT / "tests" / "proofs" / "plans" / "tiny_dp_tp.py").read_text()
    plans = {"ok": tiny, "bad": tiny.replace('all_reduce(g, DP, "sum")', 'all_reduce(g, DP, "avg")'),
             "dropout": (ROOT / "examples" / "bugs" / "B35_fixed.py").read_text()}
    want = {"ok": 0, "bad": 1, "dropout": 0}
    for name, text in plans.items():
        (d / f"{name}.py").write_text(text)
        assert prove_main([str(d / f"{name}.py"), "--certificate", str(d / f"{name}.json"),
                           "--no-check"]) == want[name], name
    r = prove(_smt_cas_problem())
    assert r.verdict == "EQUIVALENT" and r.counts["smt"] == 1
    write_certificate(d / "smt.json", certificate_of(r))
    assert {s["kind"] for s in json.loads((d / "smt.json").read_text())["steps"]} >= {"smt", "cas"}
    return d


def test_check_certificate_imports_exactly_the_documented_base(certificates):
    d = certificates
    doc = _documented()
    seen: set[str] = set()
    for cert, flags, verdict in [("ok.json", (), "EQUIVALENT"), ("bad.json", (), "NOT EQUIVALENT"),
                                 ("dropout.json", (), "EQUIVALENT"),
                                 ("smt.json", ("--no-retrace",), "EQUIVALENT")]:
        rc, files, out = _imported_by_check(d / cert, *flags)
        # the verified verdict's exit code (docs/cli.md): 0 EQUIVALENT, 1 NOT EQUIVALENT
        assert rc == {"EQUIVALENT": 0, "NOT EQUIVALENT": 1}[verdict], (cert, rc, out)
        assert out.startswith(f"certificate OK: verdict {verdict};"), (cert, out)
        assert ("plan re-traced in a separate process" in out) == (not flags), out
        assert files <= doc, (cert, sorted(files - doc))
        seen |= files
    assert seen == doc, ("documented but never imported", sorted(doc - seen))


def test_the_documented_line_counts_add_up():
    section = DOC.read_text().split("## The checker's process", 1)[1].split("\n## ", 1)[0]
    rows = re.findall(r"^\| `([a-z_/.]+)` \| (\d+) \|", section, re.M)
    total = int(re.search(r"Total: (\d+) lines", section).group(1))
    assert sum(int(n) for _, n in rows) == total
    for f, n in rows:
        assert len((ROOT / f).read_text().splitlines()) == int(n), (f, n)


EVALUATORS = {"sympify", "eval", "exec", "parse_expr", "__import__", "import_module", "loads",
              "compile", "S", "literal_eval"}
ALLOWED = {("loads", "json"), ("compile", "re")}
# spec_lang/__init__.py imports its own submodules by the names of a fixed table (PEP 562)
FIXED_IMPORTS = {("spec_lang/__init__.py", "importlib"), ("spec_lang/__init__.py", "import_module")}


@pytest.mark.parametrize("f", sorted(_documented() - {"spec_lang/load.py"}))
def test_no_module_of_the_base_evaluates_text(f):
    """No call of an evaluator or unpickler (names in code, not in docstrings) and no import of
    pickle, marshal, importlib or sympy's parser. ``spec_lang/load.py`` runs plan files: it is
    imported by the package but only ever called in the tracing child (docs/trusted-base.md)."""
    tree = ast.parse((ROOT / f).read_text())
    for n in ast.walk(tree):
        if isinstance(n, ast.Call):
            fn = n.func
            name = fn.id if isinstance(fn, ast.Name) else fn.attr if isinstance(
                fn, ast.Attribute) else None
            owner = fn.value.id if isinstance(fn, ast.Attribute) and isinstance(
                fn.value, ast.Name) else None
            assert (name, owner) in ALLOWED or (f, name) in FIXED_IMPORTS \
                or name not in EVALUATORS, (f, n.lineno, name)
        if isinstance(n, ast.Import | ast.ImportFrom):
            mods = [a.name for a in n.names] if isinstance(n, ast.Import) else [n.module or ""]
            for m in mods:
                if (f, m) in FIXED_IMPORTS:
                    continue
                assert m.split(".")[0] not in ("pickle", "marshal", "importlib", "dill",
                                               "shelve") and "parsing" not in m, (f, n.lineno, m)


def test_the_package_init_loads_no_tracer():
    code = ("import sys, spec_lang, spec_lang.term, spec_lang.evaluate\n"
            "print(sorted(m for m in sys.modules if m.startswith('spec_lang')))\n"
            "from spec_lang import ops, Spec\n"
            "assert callable(spec_lang.load) and spec_lang.ops is ops\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"}, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == str(["spec_lang", "spec_lang.errors", "spec_lang.evaluate",
                                    "spec_lang.load", "spec_lang.problem", "spec_lang.term"])


def test_python_dash_isolated_is_used(tmp_path):
    """The tracing child runs with ``-I`` (no PYTHON* variables, no user site, no script dir):
    a PYTHONSTARTUP or PYTHONPATH set for the parent does not reach it."""
    from proofs.isolation import _command

    cmd = _command("trace", "dsl", "p", "s", "o")
    assert cmd[0] == sys.executable and cmd[1] == "-I" and shutil.which(cmd[0]) is not None
