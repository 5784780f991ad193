"""Reading a certificate for the checker: the format, the version, exact numbers only (a JSON
float is malformed) and the published schema (``proofs/certificate.schema.json``).

Part of the checker's trusted base (``docs/trusted-base.md``).

Raises (from :func:`load`): :class:`proofs.errors.MalformedCertificate` (exit 3) naming the file
and, for a schema violation, the JSON path.
"""

from __future__ import annotations

import json
import zlib
from pathlib import Path
from typing import Any

from proofs.errors import CertificateError, MalformedCertificate
from proofs.kernel import paused_gc

FORMAT = "shardproof-certificate"
FORMAT_VERSION = 3
SCHEMA_FULL_LIMIT = 2000
GZIP_MAGIC = b"\x1f\x8b"
MAX_EXPANDED_BYTES = 1 << 30   # a gzip certificate may expand to at most 1 GiB of JSON
_CHUNK = 16 << 20              # expanded in pieces of at most 16 MiB (round 51b, R51b-1)
# the keys of each step kind, and of a cut step's cut points (the schema says the same)
STEP_KEYS = {
    "refl": {"kind", "lhs", "rhs"},
    "rule": {"kind", "lhs", "rhs", "rule", "subst"},
    "congr": {"kind", "lhs", "rhs", "args"},
    "trans": {"kind", "lhs", "rhs", "steps"},
    "sym": {"kind", "lhs", "rhs", "of"},
    "smt": {"kind", "lhs", "rhs", "binding", "smt2", "answer", "solver"},
    "cas": {"kind", "lhs", "rhs"},
    "rename": {"kind", "lhs", "rhs", "of"},
    "cut": {"kind", "lhs", "rhs", "lemma", "cuts"},
}
CUT_KEYS = {"spec", "plan", "var", "embed", "premise"}
CUT_PREFIX = "cut:"  # reserved INPUT-name prefix of the variables a ``cut`` step abstracts
SCHEMA_PATHS = (Path(__file__).with_name("certificate.schema.json"),
                Path(__file__).resolve().parents[1] / "docs" / "certificate.schema.json")


def _fail(msg: str) -> CertificateError:
    return CertificateError(msg)



def certificate_text(path: str | Path) -> str:
    """The JSON text of a certificate file: plain, or gzip-compressed (recognised by gzip's
    magic bytes, whatever the file's name; one member, expanding to at most
    ``MAX_EXPANDED_BYTES``, a quarter of that when not ASCII).

    Raises:
        MalformedCertificate: unreadable, a broken or oversized gzip stream, not UTF-8.
    """
    try:
        raw = Path(path).read_bytes()
    except OSError as e:
        raise MalformedCertificate(f"{path}: cannot read: {e.strerror or e}") from None
    if raw[:2] == GZIP_MAGIC:
        raw = _gunzip(path, raw)
        if not raw.isascii() and len(raw) > MAX_EXPANDED_BYTES // 4:
            # (the writer emits ASCII; other text may take 4 bytes a character once decoded)
            raise MalformedCertificate(f"{path}: non-ASCII text expands past "
                                       f"{MAX_EXPANDED_BYTES // 4} bytes")
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise MalformedCertificate(f"{path}: cannot read: {e}") from None


def _gunzip(path: str | Path, raw: bytes) -> bytes:
    """One gzip member expanded piece by piece, refused as soon as it passes the bound (so a
    refusal holds at most the bound plus one byte; round 51b, R51b-1: 8.4 GB for a 4 MB file
    when the pieces were only counted at the end)."""
    d = zlib.decompressobj(wbits=31)
    parts: list[bytes] = []
    total = 0
    data = raw
    piece = min(_CHUNK, max(1 << 16, MAX_EXPANDED_BYTES // 64))  # zlib holds a piece twice
    while True:
        step = min(piece, MAX_EXPANDED_BYTES - total + 1)   # one byte past the bound at most
        try:
            out = d.decompress(data, step)
        except zlib.error as e:
            raise MalformedCertificate(f"{path}: not a gzip stream: {e}") from None
        total += len(out)
        if total > MAX_EXPANDED_BYTES:
            raise MalformedCertificate(f"{path}: expands past {MAX_EXPANDED_BYTES} bytes")
        parts.append(out)
        data = d.unconsumed_tail
        if d.eof or (not data and len(out) < step):
            break
    if not d.eof or d.unused_data:
        raise MalformedCertificate(f"{path}: a truncated gzip stream, or more than one member")
    return b"".join(parts)


def load(path: str | Path, text: str | None = None) -> dict[str, Any]:
    """The certificate at ``path`` (its text when already read by :func:`certificate_text`),
    parsed and checked against the format, version and schema.

    Raises:
        MalformedCertificate: unreadable, not JSON, another format or version, schema.
    """
    if text is None:
        text = certificate_text(path)
    try:
        with paused_gc():
            cert = json.loads(text, parse_float=_no_float, parse_constant=_no_float)
    except (json.JSONDecodeError, ValueError, RecursionError) as e:
        raise MalformedCertificate(f"{path}: not JSON: {e}") from None
    if not isinstance(cert, dict) or cert.get("format") != FORMAT:
        raise MalformedCertificate(f"{path}: not a {FORMAT} file")
    if cert.get("format_version") != FORMAT_VERSION:
        raise MalformedCertificate(f"{path}: format_version {cert.get('format_version')!r} "
                                   f"is not supported (this checker reads {FORMAT_VERSION})")
    _validate_schema(path, cert)
    return cert


def _no_float(s: str) -> Any:
    raise ValueError(f"float {s} in a certificate (every number is exact)")


def _validate_schema(path: str | Path, cert: dict[str, Any]) -> None:
    schema_path = next((p for p in SCHEMA_PATHS if p.exists()), None)
    if schema_path is None:
        raise MalformedCertificate("certificate.schema.json is missing from the installation")
    import jsonschema

    schema = inline_refs(json.loads(schema_path.read_text()))
    # jsonschema walks ~10^5 array items slowly (tens of seconds); past SCHEMA_FULL_LIMIT rows
    # the node and step arrays are checked by the kernel and the step replay instead (both
    # reject every row they do not understand), and the schema checks everything else.
    big = {k: [] for k in ("nodes", "steps") if isinstance(cert.get(k), list)}
    rows = sum(len(cert[k]) for k in big)
    doc = cert if rows <= SCHEMA_FULL_LIMIT else {**cert, **big}
    err = jsonschema.exceptions.best_match(jsonschema.Draft202012Validator(schema).iter_errors(doc))
    if err is not None:
        where = "/".join(str(p) for p in err.absolute_path) or "(top level)"
        raise MalformedCertificate(f"{path}: schema: at {where}: {err.message[:200]}")


def inline_refs(schema: dict[str, Any]) -> dict[str, Any]:
    """``schema`` with every ``{"$ref": "#/$defs/NAME"}`` of a non-recursive definition replaced
    by (a copy of) that definition: the same constraints, so the same valid documents and the
    same errors at the same instance paths, without resolving one reference per item (27,000
    look-ups, half of the schema check, on the 405B's 4,549 obligations: issue 14). A
    definition that reaches itself (``attr``) stays a reference. Only a ``$ref`` alone in its
    object is replaced (with siblings it would need an ``allOf``); the schema has no ``$id``
    below its root, so references inside a copy resolve as they did in ``$defs``."""
    defs = schema.get("$defs", {})

    def refs(x: Any) -> set[str]:
        if isinstance(x, dict):
            r = x.get("$ref")
            own = {r[len("#/$defs/"):]} if isinstance(r, str) and r.startswith("#/$defs/") else set()
            return own.union(*(refs(v) for v in x.values()))
        return set().union(*(refs(v) for v in x)) if isinstance(x, list) else set()

    direct = {n: refs(d) for n, d in defs.items()}
    recursive = set()
    for n in defs:   # n reaches itself through the definitions it refers to
        seen, todo = set(), list(direct[n])
        while todo:
            m = todo.pop()
            if m not in seen and m in direct:
                seen.add(m)
                todo.extend(direct[m])
        if n in seen:
            recursive.add(n)

    def sub(x: Any) -> Any:
        if isinstance(x, dict):
            r = x.get("$ref")
            if len(x) == 1 and isinstance(r, str) and r.startswith("#/$defs/") and \
                    r[len("#/$defs/"):] in defs and r[len("#/$defs/"):] not in recursive:
                return sub(defs[r[len("#/$defs/"):]])
            return {k: sub(v) for k, v in x.items()}
        return [sub(v) for v in x] if isinstance(x, list) else x

    return {k: (v if k == "$defs" else sub(v)) for k, v in schema.items()} | \
        {"$defs": {n: sub(d) for n, d in defs.items()}} if defs else schema
