"""gzip-compressed certificates: written when the path ends in ``.gz``, read by magic bytes
(``proofs/checker_load.py`` ``certificate_text``), bounded when expanded."""

import gzip
import json
import zlib

import pytest

import proofs.checker_load as checker_load
from proofs.certificate import write_certificate
from proofs.checker import check_certificate
from proofs.errors import MalformedCertificate

from terms import two_row_parallel_certificate


@pytest.fixture(scope="module")
def cert_dict():
    return two_row_parallel_certificate()


def test_gz_path_writes_gzip_the_checker_reads(tmp_path, cert_dict):
    plain, packed = tmp_path / "c.json", tmp_path / "c.json.gz"
    write_certificate(plain, cert_dict)
    write_certificate(packed, cert_dict)
    raw = packed.read_bytes()
    assert raw[:2] == b"\x1f\x8b" and gzip.decompress(raw) == plain.read_bytes()
    assert len(raw) < plain.stat().st_size
    write_certificate(tmp_path / "again.json.gz", cert_dict)    # no timestamp: same bytes
    assert (tmp_path / "again.json.gz").read_bytes() == raw
    a = check_certificate(plain, retrace=False)
    b = check_certificate(packed, retrace=False)
    assert (a.verdict, a.checked, a.steps) == (b.verdict, b.checked, b.steps) == \
        ("EQUIVALENT", 2, a.steps)


def test_gzip_is_recognised_by_content_not_name(tmp_path, cert_dict):
    p = tmp_path / "c.json"
    p.write_bytes(gzip.compress(json.dumps(cert_dict).encode()))
    assert check_certificate(p, retrace=False).verdict == "EQUIVALENT"


def _bad_streams(cert_dict):
    good = gzip.compress(json.dumps(cert_dict).encode())
    return [("truncated", good[:-12], "truncated gzip stream"),
            ("two members", good + good, "more than one member"),
            ("corrupt", good[:10] + bytes(len(good) - 10), "not a gzip stream"),
            ("not UTF-8", gzip.compress(b"\xff\xfe{}"), "cannot read")]


@pytest.mark.parametrize("i", range(4))
def test_broken_gzip_is_malformed(tmp_path, cert_dict, i):
    what, data, needle = _bad_streams(cert_dict)[i]
    p = tmp_path / "c.json.gz"
    p.write_bytes(data)
    with pytest.raises(MalformedCertificate, match=needle):
        check_certificate(p, retrace=False)


def test_expansion_is_bounded(tmp_path, monkeypatch):
    """A gzip bomb stops at the bound (lowered here to 1 MiB: 8 MiB of zeros)."""
    monkeypatch.setattr(checker_load, "MAX_EXPANDED_BYTES", 1 << 20)
    p = tmp_path / "bomb.json.gz"
    c = zlib.compressobj(9, zlib.DEFLATED, 31)
    p.write_bytes(c.compress(b" " * (8 << 20)) + c.flush())
    assert p.stat().st_size < 20_000
    with pytest.raises(MalformedCertificate, match="expands past 1048576 bytes"):
        check_certificate(p, retrace=False)
