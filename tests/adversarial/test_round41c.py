"""Adversarial round 41c (``tests/adversarial/ATTEMPTS.md``, "Round 41c"), against wip/sac41 at
970c0c9 (``registry_state``: ABC registries, abc's cache token and ``sys.modules`` entries no
import made as step state, R40b-2 / R40b-5; capture children ending with ``os._exit``;
``recompute.gathered_then_written``, R41a-1). Plans in ``plans/round41c/``. Truth:
``tests/adversarial/torch4_truth.py FILE 2`` (dp 2, gloo, float64, two steps).
"""

from __future__ import annotations

from pathlib import Path

import pytest

ROUND41C = Path(__file__).resolve().parent / "plans" / "round41c"


def _not_accepted(out: dict) -> bool:
    """Anything but EQUIVALENT (NOT EQUIVALENT, UNKNOWN or a refusal)."""
    return out["_rc"] != 0 and out.get("verdict") != "EQUIVALENT"


def _equivalent(out: dict) -> bool:
    return out["_rc"] == 0 and out.get("verdict") == "EQUIVALENT"


def _prove(name: str, tmp_path: Path) -> dict:
    from tests.adversarial.torch_prove import prove

    return prove(ROUND41C / name, tmp_path)


# -- findings (open): strict xfails -------------------------------------------------------------
