"""The proofs package's exceptions (one base per concern; ``cli.py`` maps them to exit codes)."""

from __future__ import annotations

__all__ = ["ProofError", "CertificateError", "MalformedCertificate"]


class ProofError(Exception):
    """The prover could not run on this input (bad input is reported as exit 3 by the CLI)."""


class CertificateError(Exception):
    """A certificate was rejected by the checker: one line saying which check failed."""


class MalformedCertificate(CertificateError):
    """A certificate file is unreadable or not of the certificate format (exit 3)."""
