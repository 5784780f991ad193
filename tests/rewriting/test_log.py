"""The proof log: every rule's instance normalises and serialises; records are well formed."""

from __future__ import annotations

import json

import pytest

from rewriting import RULES, Normaliser, normalise
from rewriting.build import encode_attr

from rw_helpers import RandomDraw


@pytest.mark.parametrize("rule", RULES, ids=lambda r: r.name)
def test_instance_normalises_and_serialises(rule):
    for seed in range(3):
        lhs, binding = rule.sample(RandomDraw(seed))
        s = rule.match(lhs, binding)
        for v in s.values():  # every substitution value has a JSON encoding
            if not hasattr(v, "op") and not (isinstance(v, tuple) and v and hasattr(v[0], "op")):
                encode_attr(v)
        rhs = rule.rhs(s, binding)
        n = Normaliser(binding)
        (a, c), log = normalise([lhs, rhs], binding, normaliser=n)
        assert a is c, f"{rule.name}: lhs and rhs normalise apart: {a!r} vs {c!r}"
        j = log.to_json(roots=[lhs, rhs])
        text = json.dumps(j, sort_keys=True)
        assert json.loads(text) == j
        _check_structure(j)


def _check_structure(j):
    """Records refer only to earlier records; chains start at the term and end at the nf."""
    nodes = j["nodes"]
    for i, r in enumerate(j["records"]):
        cur = r["term"]
        for st in r["steps"]:
            if st["kind"] == "trans":
                assert st["record"] < i
                assert j["records"][st["record"]]["term"] == cur
                cur = j["records"][st["record"]]["nf"]
                continue
            assert st["lhs"] == cur
            if st["kind"] == "congr":
                lo, ro = nodes[st["lhs"]], nodes[st["rhs"]]
                assert lo[0] == ro[0] and lo[2] == ro[2] and lo[3] == ro[3]
                for k, a, c in zip(st["args"], lo[1], ro[1]):
                    if k is None:
                        assert a == c
                    else:
                        assert k < i and j["records"][k]["term"] == a and j["records"][k]["nf"] == c
            cur = st["rhs"]
        assert cur == r["nf"]
