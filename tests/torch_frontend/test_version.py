"""Version pinning of the capture layer (issue 11, item 8): the supported torch releases are
named, any other is one line and exit 3 before the train file runs, and every private torch API
the capture layer uses still resolves in the installed torch."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from spec_lang.errors import PlanError
from spec_lang.torch_frontend.version import (
    PRIVATE_APIS, SUPPORTED_TORCH, UnsupportedTorch, check_torch, resolve,
)

ROOT = Path(__file__).resolve().parents[2]


def test_the_installed_torch_is_supported():
    assert check_torch() == torch.__version__.split("+")[0]
    assert check_torch("2.13.0+cpu") == "2.13.0" and "2.13.0" in SUPPORTED_TORCH


@pytest.mark.parametrize("version", ["2.12.1", "2.14.0", "2.13.1+cu128", "1.13.0"])
def test_other_releases_are_refused_with_one_line(version):
    with pytest.raises(UnsupportedTorch) as ei:
        check_torch(version)
    msg = str(ei.value)
    assert isinstance(ei.value, PlanError) and "\n" not in msg
    assert f"torch {version} is not supported" in msg and "install torch==2.13.0" in msg


@pytest.mark.parametrize("api", PRIVATE_APIS)
def test_every_private_api_resolves(api):
    assert resolve(api) is not None


def test_the_private_apis_listed_are_the_ones_the_code_names():
    # each listed name's last component occurs in the front end's source (no stale entries)
    src = "".join(p.read_text() for p in (ROOT / "spec_lang" / "torch_frontend").glob("*.py")
                  if p.name != "version.py")
    stale = [a for a in PRIVATE_APIS
             if a.rsplit(".", 1)[-1] not in src and a.split(".")[-2] not in src]
    assert not stale, stale


def test_an_unsupported_torch_is_a_plan_error_in_the_tracing_child(tmp_path):
    """The tracing child (proofs/isolation.py) answers {"error": {"kind": "plan"}} -- prove's
    exit 3 -- naming the release, before the train file runs (it would write a marker)."""
    train = tmp_path / "train.py"
    marker = tmp_path / "ran"
    train.write_text(f"open({str(marker)!r}, 'w').close()\n")
    src = tmp_path / "source"
    src.write_bytes(train.read_bytes())
    out = tmp_path / "out.json"
    code = ("import sys; sys.path.insert(0, sys.argv[1]); import torch; "
            "torch.__version__ = '2.12.0'; from proofs.isolation import child_main; "
            "sys.exit(child_main(sys.argv[2:]))")
    r = subprocess.run([sys.executable, "-I", "-c", code, str(ROOT), "trace", "torch",
                        str(train), str(src), str(out)], capture_output=True, timeout=300)
    assert r.returncode == 0, r.stderr[-500:]
    doc = json.loads(out.read_text())
    assert doc["error"]["kind"] == "plan"
    assert "torch 2.12.0 is not supported" in doc["error"]["message"]
    assert not marker.exists()
