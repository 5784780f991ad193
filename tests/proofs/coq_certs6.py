"""A hand-made certificate for the Coq lemmas of the sixth round (issue 17, docs/coq.md): one
instance of gelu-def (``RulesActivation.v``), of einsum-unit-dim, squeeze-elementwise and
reduce-max-unit-dim (``RulesUnitDim.v``) and of einsum-components (``RulesComponents.v``),
and edits that put each step outside its rule's guard or make it false (used by
``tests/proofs/test_coq_unit_dims.py``)."""

from __future__ import annotations

from typing import Any, Callable


def _d(*names: str) -> list:
    return [[n, []] for n in names]


def _q(v: str) -> dict:
    return {"q": v}


def rounds6() -> dict:
    """x: (B, H), y: (G, H), u: (B, G, H), w: (B, J, H), p: (B, K, H), s: (K, H) real inputs;
    B = H = F = S = 4, G = J = K = 1. gelu-def (``GELU(x) = x/2 (1 + ERF(x / sqrt 2))``),
    einsum-unit-dim (``sum_G u y = sum (sum_G u) (sum_G y)``), squeeze-elementwise
    (``sum_K (p s) = (sum_K p) (sum_K s)``), reduce-max-unit-dim (``max_{J,H} w = max_H
    (sum_J w)`` and ``max_J w = sum_J w``) and einsum-components (``sum_S a b c = (sum_S a b)
    (sum_F c)``, a: (S, H), b: (B, S), c: F), each an obligation."""
    nodes = [
        ["INPUT", [], ["x", "data", "real"], _d("B", "H")],          # 0
        ["GELU", [0], [], _d("B", "H")],                             # 1
        ["CONST", [], [_q("1/2")], []],                              # 2
        ["CONST", [], [_q("1/1")], []],                              # 3
        ["CONST", [], [{"alg": [["1/2", [["2", "1/2"]]]]}], []],     # 4: 1/sqrt 2
        ["MUL", [4, 0], [], _d("B", "H")],                           # 5
        ["ERF", [5], [], _d("B", "H")],                              # 6
        ["ADD", [3, 6], [], _d("B", "H")],                           # 7
        ["MUL", [2, 0, 7], [], _d("B", "H")],                        # 8: gelu-def's rhs
        ["INPUT", [], ["u", "data", "real"], _d("B", "G", "H")],     # 9
        ["INPUT", [], ["y", "data", "real"], _d("G", "H")],          # 10
        ["EINSUM", [9, 10], [["B"]], _d("B")],                       # 11: sum_{G,H} u y
        ["EINSUM", [9], [["B", "H"]], _d("B", "H")],                 # 12: u squeezed
        ["EINSUM", [10], [["H"]], _d("H")],                          # 13: y squeezed
        ["EINSUM", [12, 13], [["B"]], _d("B")],                      # 14
        ["INPUT", [], ["p", "data", "real"], _d("B", "H", "K")],     # 15
        ["INPUT", [], ["s", "data", "real"], _d("H", "K")],          # 16
        ["MUL", [15, 16], [], _d("B", "H", "K")],                    # 17
        ["EINSUM", [17], [["B", "H"]], _d("B", "H")],                # 18: sum_K p s
        ["EINSUM", [15], [["B", "H"]], _d("B", "H")],                # 19
        ["EINSUM", [16], [["H"]], _d("H")],                          # 20
        ["MUL", [19, 20], [], _d("B", "H")],                         # 21
        ["INPUT", [], ["w", "data", "real"], _d("B", "H", "J")],     # 22
        ["REDUCE_MAX", [22], [["H", "J"]], _d("B")],                 # 23: max_{H,J} w
        ["EINSUM", [22], [["B", "H"]], _d("B", "H")],                # 24: w squeezed
        ["REDUCE_MAX", [24], [["H"]], _d("B")],                      # 25
        ["REDUCE_MAX", [22], [["J"]], _d("B", "H")],                 # 26: max_J w
        ["INPUT", [], ["a", "data", "real"], _d("H", "S")],          # 27
        ["INPUT", [], ["b", "data", "real"], _d("B", "S")],          # 28
        ["INPUT", [], ["c", "data", "real"], _d("F")],               # 29
        ["EINSUM", [27, 28, 29], [["B", "H"]], _d("B", "H")],        # 30
        ["EINSUM", [27, 28], [["B", "H"]], _d("B", "H")],            # 31
        ["EINSUM", [29], [[]], []],                                  # 32
        ["MUL", [31, 32], [], _d("B", "H")],                         # 33
    ]
    ns = lambda *xs: {"nodes": list(xs)}  # noqa: E731
    rows = [("gelu", "gelu-def", 1, 8, {"x": {"node": 0}}),
            ("unitdim", "einsum-unit-dim", 11, 14, {"xs": ns(9, 10), "out": ["B"]}),
            ("squeezeew", "squeeze-elementwise", 18, 21,
             {"op": "MUL", "attrs": [], "xs": ns(15, 16), "out": ["B", "H"]}),
            ("maxunit", "reduce-max-unit-dim", 23, 25, {"x": {"node": 22}, "dims": ["H", "J"]}),
            ("maxunitall", "reduce-max-unit-dim", 26, 24, {"x": {"node": 22}, "dims": ["J"]}),
            ("components", "einsum-components", 30, 33, {"xs": ns(27, 28, 29), "out": ["B", "H"]})]
    steps = [{"kind": "rule", "rule": rule, "lhs": lhs, "rhs": rhs, "subst": sub}
             for _n, rule, lhs, rhs, sub in rows]
    obs = [{"name": n, "kind": "loss", "method": "rewrite", "expected": lhs, "actual": rhs,
            "proof": k} for k, (n, _r, lhs, rhs, _s) in enumerate(rows)]
    return {"format": "shardproof-certificate", "format_version": 3, "verdict": "EQUIVALENT",
            "binding": {"B": 4, "H": 4, "F": 4, "S": 4, "G": 1, "J": 1, "K": 1},
            "nodes": nodes, "steps": steps, "obligations": obs,
            "plan": {"path": "rounds6.py", "sha256": "0" * 64}}


def _set(c: dict, node: int, k: int, v: Any) -> None:
    c["nodes"][node][k] = v


def _bind(c: dict, n: str, v: int) -> None:
    c["binding"][n] = v


# one edit per obligation of rounds6: each step outside its rule's guard (a squeezed dim whose
# size is not 1, a split into groups that share a summed dim) or false (another constant in
# GELU's definition)
ROUNDS6_MUTANTS: dict[str, Callable[[dict], Any]] = {
    "gelu": lambda c: _set(c, 4, 2, [_q("1/3")]),                 # x/3 in ERF: not 1/sqrt 2
    "unitdim": lambda c: _bind(c, "G", 2),                        # |G| = 2: a sum, no squeeze
    "squeezeew": lambda c: _bind(c, "K", 2),                      # |K| = 2
    "maxunit": lambda c: _bind(c, "J", 2),                        # |J| = 2 (both max steps)
    "maxunitall": lambda c: _bind(c, "J", 2),
    "components": lambda c: (_set(c, 29, 3, _d("S")),             # c over S: shares S with a, b
                             _set(c, 32, 3, [])),
}
