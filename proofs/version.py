"""The ``shardproof`` version that ``prove --version`` and ``check-certificate --version`` print.

Kept out of :mod:`proofs.cli` so that ``check-certificate``'s trusted base
(``docs/trusted-base.md``) does not import :mod:`importlib`: this module is loaded only when
``--version`` is given.
"""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

__all__ = ["package_version"]


def package_version() -> str:
    """The installed ``shardproof`` distribution's version (``importlib.metadata``); in a source
    checkout that is not installed, ``pyproject.toml``'s ``project.version`` beside the package
    (``"unknown"`` if neither is there). ``simulator/cli.py`` has the same lookup for
    ``shardproof --version`` (the two halves do not import each other)."""
    try:
        return version("shardproof")
    except PackageNotFoundError:
        import tomllib

        try:
            with open(Path(__file__).resolve().parents[1] / "pyproject.toml", "rb") as f:
                return str(tomllib.load(f)["project"]["version"])
        except (OSError, KeyError, tomllib.TOMLDecodeError):
            return "unknown"
