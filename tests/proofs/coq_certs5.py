"""A hand-made certificate for the Coq lemmas of the fifth round (issue 17, docs/coq.md):
one instance of each rule whose lemma is in ``proofs/coq/RulesOnline.v``, and edits that make
each step false or put it outside its rule's guard (used by ``tests/proofs/test_coq_online.py``)."""

from __future__ import annotations

from typing import Any, Callable


def _d(*specs: tuple) -> list:
    return [[n, list(sh)] for n, sh in specs]


def _q(v: str) -> dict:
    return {"q": v}


def rounds5() -> dict:
    """x, y: (B, H) real, v: H real; B = H = 4, |dp| = 2. The online-softmax rules:
    einsum-max-factor-out (``sum_H y exp(max_H x) v = exp(max_H x) sum_H y v``),
    einsum-recip-factor-out (``sum_H (sum_H y)^-1 x = (sum_H y)^-1 sum_H x``) and
    exp-max-shift-block (``exp(y_b + SHARD(-m)) = exp(y_b) exp(SHARD(m))^-1``, the block of
    rank ``dp``), each an obligation."""
    BH, B_ = _d(("B", ()), ("H", ())), _d(("B", ()))
    Bdp, BdpH = _d(("B", ("dp",))), _d(("B", ("dp",)), ("H", ()))
    nodes = [
        ["INPUT", [], ["x", "data", "real"], BH],                  # 0
        ["INPUT", [], ["y", "data", "real"], BH],                  # 1
        ["INPUT", [], ["v", "param", "real"], _d(("H", ()))],      # 2
        ["REDUCE_MAX", [0], [["H"]], B_],                          # 3: m = max_H x
        ["EXP", [3], [], B_],                                      # 4: f = exp(m)
        ["EINSUM", [1, 4, 2], [["B"]], B_],                        # 5
        ["EINSUM", [1, 2], [["B"]], B_],                           # 6
        ["MUL", [4, 6], [], B_],                                   # 7
        ["EINSUM", [1], [["B"]], B_],                              # 8: s = sum_H y
        ["POW", [8], [_q("-1/1")], B_],                            # 9: 1/s
        ["EINSUM", [9, 0], [["B"]], B_],                           # 10
        ["EINSUM", [0], [["B"]], B_],                              # 11
        ["MUL", [9, 11], [], B_],                                  # 12
        ["CONST", [], [_q("-1/1")], []],                           # 13
        ["MUL", [13, 3], [], B_],                                  # 14: -m
        ["SHARD", [14], ["B", "dp"], Bdp],                         # 15: its block
        ["SHARD", [1], ["B", "dp"], BdpH],                         # 16: y's block
        ["ADD", [16, 15], [], BdpH],                               # 17
        ["EXP", [17], [], BdpH],                                   # 18
        ["EXP", [16], [], BdpH],                                   # 19
        ["SHARD", [3], ["B", "dp"], Bdp],                          # 20: m's block
        ["EXP", [20], [], Bdp],                                    # 21
        ["POW", [21], [_q("-1/1")], Bdp],                          # 22
        ["MUL", [19, 22], [], BdpH],                               # 23
    ]
    rows = [("maxfactor", "einsum-max-factor-out", 5, 7,
             {"f": {"node": 4}, "k": 1, "rest": {"nodes": [1, 2]}, "out": ["B"]}),
            ("recipfactor", "einsum-recip-factor-out", 10, 12,
             {"f": {"node": 9}, "k": 0, "rest": {"nodes": [0]}, "out": ["B"]}),
            ("shiftblock", "exp-max-shift-block", 18, 23,
             {"xs": {"nodes": [16, 15]}, "k": 1, "ws": [["SHARD", "B", "dp"]],
              "c": _q("-1/1"), "m": {"node": 3}})]
    steps = [{"kind": "rule", "rule": rule, "lhs": lhs, "rhs": rhs, "subst": sub}
             for _n, rule, lhs, rhs, sub in rows]
    obs = [{"name": n, "kind": "loss", "method": "rewrite", "expected": lhs, "actual": rhs,
            "proof": k} for k, (n, _r, lhs, rhs, _s) in enumerate(rows)]
    return {"format": "shardproof-certificate", "format_version": 3, "verdict": "EQUIVALENT",
            "binding": {"B": 4, "H": 4, "dp": 2},
            "nodes": nodes, "steps": steps, "obligations": obs,
            "plan": {"path": "rounds5.py", "sha256": "0" * 64}}


def _set(c: dict, node: int, k: int, v: Any) -> None:
    c["nodes"][node][k] = v


# one edit per obligation of rounds5: each step outside its rule's guard (the equation stays
# true: only the guard can reject it) or false
ROUNDS5_MUTANTS: dict[str, Callable[[dict], Any]] = {
    "maxfactor": lambda c: (_set(c, 4, 0, "POW"),               # f = m^1: not exp(m)
                            _set(c, 4, 2, [_q("1/1")])),
    "recipfactor": lambda c: _set(c, 9, 2, [_q("1/1")]),        # f = (sum_H y)^1: e > 0
    "shiftblock": lambda c: (_set(c, 13, 2, [_q("1/1")]),       # c = 1: not negative
                             _set(c, 22, 2, [_q("1/1")])),
}

# edits that make each step false (inside the guard's shape)
ROUNDS5_FALSE: dict[str, Callable[[dict], Any]] = {
    "maxfactor": lambda c: _set(c, 6, 1, [0, 2]),               # x for y in the inner sum
    "recipfactor": lambda c: _set(c, 10, 1, [9, 1]),            # y for x on the left
    "shiftblock": lambda c: _set(c, 22, 2, [_q("-2/1")]),       # exp(m)^-2 for exp(m)^-1
}
