"""Adversarial round 51b: gzip certificates (``proofs/checker_load.py`` ``certificate_text``,
``proofs/certificate.py`` ``write_certificate``) and the tightened class-cut walk.

Attempt ids g01..g33 (gzip streams), b1..b6 (bombs), w1..w8 (writer), c1..c3 (class walk) are
those of ``ATTEMPTS.md`` "Round 51b". Findings: R51b-1 (a gzip certificate of a few MB makes
the checker hold several times ``MAX_EXPANDED_BYTES``), R51b-2 (the .gz bytes of one
certificate depend on the Python version).
"""

from __future__ import annotations

import bz2
import gzip
import json
import lzma
import os
import struct
import subprocess
import sys
import tracemalloc
import zlib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "proofs"))

import proofs.checker_load as checker_load  # noqa: E402
from proofs.certificate import certificate_of, write_certificate  # noqa: E402
from proofs.checker import check_certificate  # noqa: E402
from proofs.errors import CertificateError, MalformedCertificate  # noqa: E402
from proofs.prover import prove  # noqa: E402
from terms import SIZES, inp, mul, problem, row_parallel, two_row_parallel_certificate  # noqa: E402
from test_checker_cut import Cert  # noqa: E402


@pytest.fixture(scope="module")
def cert_dict():
    return two_row_parallel_certificate()


def _plain(c):
    return (json.dumps(c, sort_keys=True, separators=(",", ":")) + "\n").encode()


def _outcome(path):
    """(verdict or exception class, message without the path)."""
    try:
        r = check_certificate(path, retrace=False)
        return ("ok", r.verdict, r.checked, r.steps)
    except CertificateError as e:
        return (type(e).__name__, str(e).replace(str(path), "PATH"))


# -- g01..g33: gzip stream variants -------------------------------------------------------------
def _hdr(flags, extra=b""):
    return b"\x1f\x8b\x08" + bytes([flags]) + b"\0\0\0\0\0\xff" + extra


def _variants(j):
    co = zlib.compressobj(6, zlib.DEFLATED, -15)
    raw = co.compress(j) + co.flush()
    trl = struct.pack("<II", zlib.crc32(j), len(j))
    g = gzip.compress(j, 6, mtime=0)
    h = _hdr(2)
    crc = zlib.crc32(h) & 0xffff
    ok, bad = "ok", MalformedCertificate.__name__
    return {   # name: (bytes, expected class, message needle)
        "g01_fextra": (_hdr(4, struct.pack("<H", 6) + b"AB\x02\0xy") + raw + trl, ok, ""),
        "g02_fname": (_hdr(8, b"evil.json\0") + raw + trl, ok, ""),
        "g03_fcomment": (_hdr(16, b"comment\0") + raw + trl, ok, ""),
        "g04_fhcrc": (h + struct.pack("<H", crc) + raw + trl, ok, ""),
        "g04b_fhcrc_bad": (h + struct.pack("<H", crc ^ 1) + raw + trl, bad, "header crc"),
        "g05_two_members": (g + g, bad, "more than one member"),
        "g05b_split_members": (gzip.compress(j[:100], mtime=0) + gzip.compress(j[100:], mtime=0),
                               bad, "more than one member"),
        "g06_trailing_zeros": (g + b"\0" * 8, bad, "more than one member"),
        "g07_zlib": (zlib.compress(j), bad, "cannot read"),
        "g08_raw_deflate": (raw, bad, "cannot read"),
        "g09_bz2": (bz2.compress(j), bad, "cannot read"),
        "g10_xz": (lzma.compress(j), bad, "cannot read"),
        "g11_empty": (b"", bad, "not JSON"),
        "g12_1f": (b"\x1f", bad, "not JSON"),
        "g13_magic_only": (b"\x1f\x8b", bad, "truncated"),
        "g14_truncated": (g[:len(g) // 2], bad, "truncated"),
        "g15_bad_crc": (g[:-8] + struct.pack("<II", zlib.crc32(j) ^ 1, len(j)), bad,
                        "incorrect data check"),
        "g16_bad_isize": (g[:-8] + struct.pack("<II", zlib.crc32(j), len(j) + 1), bad,
                          "incorrect length check"),
        "g17_no_trailer": (g[:-8], bad, "truncated"),
        "g18_reserved_flag": (_hdr(0x20) + raw + trl, bad, "unknown header flags"),
        "g19_method7": (b"\x1f\x8b\x07\0" + g[4:], bad, "unknown compression method"),
        "g20_nested_gzip": (gzip.compress(g, mtime=0), bad, "cannot read"),
        "g21_fextra_overlong": (_hdr(4, struct.pack("<H", 65535) + b"A" * 10) + raw + trl, bad,
                                "truncated"),
        "g22_fname_unterminated": (_hdr(8, b"x" * 100), bad, "truncated"),
        "g27_empty_member": (gzip.compress(b"", mtime=0), bad, "not JSON"),
        "g29_whitespace_tail": (gzip.compress(j + b"  \n\n", mtime=0), ok, ""),
        "g32_deep_nesting": (gzip.compress(b"[" * 1_000_000 + b"]" * 1_000_000, mtime=0), bad,
                             "not JSON"),
        "g33_stored_blocks": (gzip.compress(j, 0, mtime=0), ok, ""),
    }


NAMES = sorted(_variants(b"{}"))


@pytest.mark.parametrize("name", NAMES)
def test_gzip_stream_variant(tmp_path, cert_dict, name):
    """Every header flag gzip allows is read; everything else is one MalformedCertificate."""
    data, cls, needle = _variants(_plain(cert_dict))[name]
    p = tmp_path / "c.json.gz"
    p.write_bytes(data)
    out = _outcome(p)
    print(name, out)
    if cls == "ok":
        assert out[:2] == ("ok", "EQUIVALENT")
    else:
        assert out[0] == cls and needle in out[1] and "\n" not in out[1]


# -- g23..g31: the same JSON, plain and gzip: the same judgement ---------------------------------
def _json_variants(j):
    return {"g23_bom": b"\xef\xbb\xbf" + j,
            "g24_utf16": j.decode().encode("utf-16"),
            "g25_float": j.replace(b'"format_version":3', b'"format_version":3.0'),
            "g26_schema": j.replace(b'"format_version":3', b'"format_version":3,"zzz":1'),
            "g28_garbage_after_json": j + b"xx",
            "g30_invalid_utf8": j.replace(b'"format"', b'"form\xffat"'),
            "g31_nan": j.replace(b'"format_version":3', b'"format_version":NaN'),
            "g34_valid": j}


@pytest.mark.parametrize("name", sorted(_json_variants(b"")))
def test_gzip_and_plain_are_judged_alike(tmp_path, cert_dict, name):
    data = _json_variants(_plain(cert_dict))[name]
    a, b = tmp_path / "c.json", tmp_path / "c.json.gz"
    a.write_bytes(data)
    b.write_bytes(gzip.compress(data, mtime=0))
    oa, ob = _outcome(a), _outcome(b)
    print(name, oa)
    assert oa == ob
    assert oa[0] == ("ok" if name == "g34_valid" else "MalformedCertificate")


# -- b1..b6: bombs (scaled down: the bound lowered to 8 MiB; measured at 4 GiB in ATTEMPTS.md) --
BOUND = 8 << 20


def _bomb(path, head, n):
    c = zlib.compressobj(9, zlib.DEFLATED, 31)
    path.write_bytes(c.compress(head) + c.compress(b" " * n) + c.flush())


def _peak(monkeypatch, path):
    monkeypatch.setattr(checker_load, "MAX_EXPANDED_BYTES", BOUND)
    tracemalloc.start()
    try:
        with pytest.raises(MalformedCertificate) as ei:
            checker_load.load(path)
        return tracemalloc.get_traced_memory()[1], str(ei.value)
    finally:
        tracemalloc.stop()


def test_b1_whitespace_within_the_bound_is_malformed(tmp_path, monkeypatch):
    p = tmp_path / "b.gz"
    _bomb(p, b"", BOUND)
    peak, msg = _peak(monkeypatch, p)
    print(peak / BOUND, msg)
    assert "not JSON" in msg


def test_b4_refusal_past_the_bound_holds_at_most_the_bound(tmp_path, monkeypatch):
    """R51b-1: refusing a stream past the bound held about twice the bound (8.4 GB RSS for a
    4 MB file at the then 4 GiB bound); fixed by the lead: the expansion is refused piece by
    piece, one byte past the bound at most (``checker_load._gunzip``)."""
    p = tmp_path / "b.gz"
    _bomb(p, b"", BOUND + 1)
    peak, msg = _peak(monkeypatch, p)
    print(peak / BOUND, msg)
    assert "expands past" in msg
    assert peak < 1.5 * BOUND


def test_b6_non_ascii_text_holds_at_most_twice_the_bound(tmp_path, monkeypatch):
    """R51b-1: the writer emits ASCII only (``json.dumps`` ensure_ascii); the reader decoded any
    UTF-8, whose str may take 4 bytes per expanded byte (5.3 GB RSS for 1 GiB of spaces after
    one emoji). Fixed by the lead: non-ASCII text may expand to a quarter of the bound."""
    p = tmp_path / "b.gz"
    _bomb(p, "\U0001F600".encode(), BOUND - 4)
    peak, msg = _peak(monkeypatch, p)
    print(peak / BOUND, msg)
    assert peak < 2.5 * BOUND


# -- w1..w8: the writer ---------------------------------------------------------------------------
def test_w1_same_certificate_same_bytes(tmp_path, cert_dict):
    write_certificate(tmp_path / "a.json.gz", cert_dict)
    write_certificate(tmp_path / "b.json.gz", cert_dict)
    a = (tmp_path / "a.json.gz").read_bytes()
    assert a == (tmp_path / "b.json.gz").read_bytes()
    assert gzip.decompress(a) == _plain(cert_dict)


def test_w2_gzip_header_is_fixed(tmp_path, cert_dict):
    """R51b-2: the header depended on the interpreter (OS byte 3 on 3.11/3.12, 255 on 3.13);
    fixed by the lead: the writer sets OS byte 255 ("unknown")."""
    p = tmp_path / "a.json.gz"
    write_certificate(p, cert_dict)
    assert p.read_bytes()[:10] == b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\xff"


def test_w3_interrupted_write_leaves_nothing(tmp_path, cert_dict, monkeypatch):
    """KeyboardInterrupt at the rename (after the data is written): no temp file, no target."""
    def boom(*a):
        raise KeyboardInterrupt
    monkeypatch.setattr(os, "replace", boom)
    with pytest.raises(KeyboardInterrupt):
        write_certificate(tmp_path / "c.json.gz", cert_dict)
    assert os.listdir(tmp_path) == []


def test_w4_existing_certificate_survives_a_failed_write(tmp_path, cert_dict, monkeypatch):
    p = tmp_path / "c.json.gz"
    write_certificate(p, cert_dict)
    before = p.read_bytes()
    monkeypatch.setattr(gzip, "compress", lambda *a, **k: (_ for _ in ()).throw(MemoryError()))
    with pytest.raises(MemoryError):
        write_certificate(p, cert_dict)
    assert p.read_bytes() == before and os.listdir(tmp_path) == ["c.json.gz"]


def test_w5_dot_gz_names(tmp_path, cert_dict):
    """``x.GZ`` and the dot file ``.gz`` are written plain (``Path.suffix``); the checker reads
    them by content either way."""
    for n in ("x.GZ", ".gz", "x.tar.gz"):
        write_certificate(tmp_path / n, cert_dict)
        raw = (tmp_path / n).read_bytes()
        assert (raw[:2] == b"\x1f\x8b") == (n == "x.tar.gz")
        assert _outcome(tmp_path / n)[:2] == ("ok", "EQUIVALENT")


def _prove_cli(*args):
    r = subprocess.run([sys.executable, "-m", "proofs.cli", "prove", *args], cwd=ROOT,
                       capture_output=True, text=True, timeout=300,
                       env={**os.environ, "PYTHONPATH": str(ROOT)})
    return r.returncode, r.stdout, r.stderr


def test_w6_prove_to_a_directory_named_gz(tmp_path):
    (tmp_path / "d.gz").mkdir()
    rc, _, err = _prove_cli(str(ROOT / "examples/bugs/B01_fixed.py"), "--certificate",
                            str(tmp_path / "d.gz"))
    assert rc == 3 and "is a directory" in err


@pytest.mark.parametrize("plan,verdict,rc", [("B01_fixed", "EQUIVALENT", 0),
                                             ("B01_buggy", "NOT EQUIVALENT", 1)])
def test_w7_prove_writes_gzip_and_self_checks(tmp_path, plan, verdict, rc):
    out = tmp_path / "c.json.gz"
    got, so, _ = _prove_cli(str(ROOT / f"examples/bugs/{plan}.py"), "--certificate", str(out))
    assert got == rc and f"verdict {verdict}," in so
    assert out.read_bytes()[:2] == b"\x1f\x8b"
    assert sorted(os.listdir(tmp_path)) == ["c.json.gz"]


def test_w8_prove_into_a_missing_directory(tmp_path):
    rc, _, err = _prove_cli(str(ROOT / "examples/bugs/B01_fixed.py"), "--certificate",
                            str(tmp_path / "no" / "c.json.gz"))
    assert rc == 3 and "does not exist" in err


# -- c1..c3: the class-cut walk's exact attribute keys --------------------------------------------
S, P = row_parallel()                         # spec (B, H); plan all-reduced (B, H); S == P
XC = inp("cut:0", "B", "H", kind="cut")


@pytest.fixture(scope="module")
def base():
    from terms import shard
    goals = [("grad:aux_p", "grad", shard(S, "B", "dp"), shard(P, "B", "dp")),
             ("grad:w1", "grad", S, P)]
    r = prove(problem(goals, SIZES))
    assert r.verdict == "EQUIVALENT"
    return certificate_of(r)


def _class_cut(tmp_path, base, lem_attrs, lhs_attrs, rhs_attrs, op="RANK_CONST", kinds=None):
    """refl lemma ``MUL(C_lem, v1)`` cut as ``MUL(C_lhs, v2) == MUL(C_rhs, v2)`` (a false
    equation whenever C_lhs != C_rhs); the outcome of the checker on the JSON round trip."""
    from terms import shard
    k = Cert(base)
    ka, kb = kinds or ("param", "param")
    v1, v2 = k.node(inp("v1", "B", kind=ka)), k.node(inp("v2", "B", kind=kb))
    c = [k.row(op, (), a, ()) for a in (lem_attrs, lhs_attrs, rhs_attrs)]
    n = k.row("MUL", (c[0], v1), (), (("B", ()),))
    lem = k.step({"kind": "refl", "lhs": n, "rhs": n})
    lhs = k.row("MUL", (c[1], v2), (), (("B", ()),))
    rhs = k.row("MUL", (c[2], v2), (), (("B", ()),))
    k.step({"kind": "cut", "lhs": lhs, "rhs": rhs, "lemma": lem,
            "cuts": [{"spec": k.node(S), "plan": k.ob["grad:aux_p"]["actual"],
                      "var": k.node(XC), "embed": k.node(shard(XC, "B", "dp")),
                      "premise": k.proof("grad:aux_p")}]})
    p = tmp_path / "c.json.gz"
    write_certificate(p, k.c)
    return _outcome(p)


def test_c1_fraction_vs_int_in_a_nested_attr(tmp_path, base):
    """RANK_CONST(dp, (1/3, 2)) (a Fraction inside a tuple) claimed equal to (1, 2): rejected."""
    from fractions import Fraction
    out = _class_cut(tmp_path, base, ("dp", (Fraction(1, 3), 2)), ("dp", (Fraction(1, 3), 2)),
                     ("dp", (1, 2)))
    print(out)
    assert out[0] == "CertificateError" and "(cut)" in out[1]


def test_c2_renaming_across_input_kinds_is_rejected(tmp_path, base):
    out = _class_cut(tmp_path, base, ("dp", (1, 2)), ("dp", (1, 2)), ("dp", (1, 2)),
                     kinds=("param", "data"))
    print(out)
    assert out[0] == "CertificateError" and "differ in kind or domain" in out[1]


def test_c3_bool_vs_int_in_a_nested_attr_gzip(tmp_path, base):
    """a12 again, through a gzip certificate: (true, 2) vs (1, 2)."""
    out = _class_cut(tmp_path, base, ("dp", (1, 2)), ("dp", (True, 2)), ("dp", (1, 2)))
    print(out)
    assert out[0] == "CertificateError" and "differ in attrs" in out[1]


def test_c0_a_true_class_cut_is_accepted(tmp_path, base):
    """Control: the same construction with equal constants is accepted (gzip)."""
    out = _class_cut(tmp_path, base, ("dp", (1, 2)), ("dp", (1, 2)), ("dp", (1, 2)))
    print(out)
    assert out[0] == "ok"
