"""The reference spelling of a node table's Merkle hashes (``docs/certificate.md``, "Nodes"),
which the memoised ``proofs.kernel.node_hash_table`` must equal (``test_node_hashes.py``,
``tests/adversarial/test_round30.py``)."""

from __future__ import annotations

import hashlib

from proofs.kernel import NodeTable, canonical_json, encode_attr


def node_hash_table_plain(table: NodeTable) -> list[str]:
    """The reference spelling (``docs/certificate.md``, "Nodes"): one ``canonical_json`` call
    per node."""
    hs: list[str] = []
    for op, args, attrs, dims in table.nodes:
        payload = canonical_json([op, [hs[a] for a in args], [encode_attr(a) for a in attrs],
                                  [[n, list(s)] for n, s in dims]])
        hs.append(hashlib.sha256(payload.encode()).hexdigest())
    return hs
