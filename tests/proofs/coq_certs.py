"""Two hand-made certificates for the Coq tests (``tests/proofs/test_coq.py``): ``small()``,
one instance of each rule of issue 17's first round, and ``moves()``, one of each rule of its
second round. Plain data, no imports."""


# -- a small certificate, by hand ---------------------------------------------------------------
def small() -> dict:
    """x: B (size 4); NEG(x) = MUL(-1, x) (neg-mul), POW(x, 1) = x (pow-one),
    DIM_SIZE(B) = 4 (dim-size), RANK_CONST(dp, (3, 3)) = 3 (rank-const-uniform),
    ALL_REDUCE(x, tp, sum) = x with |tp| = 1 (allreduce-unit-axis), ALL_REDUCE(x, cp, sum) =
    MUL(3, x) and ALL_REDUCE(x, cp, max) = x with |cp| = 3 (allreduce-sum/max-invariant),
    sum_B x y = sum_B y x (einsum-canon), (x y)^2 = x^2 y^2 (pow-mul); EINSUM((x,), B) = x
    (einsum-identity), EINSUM(x, y; B) = MUL(x, y) (einsum-pointwise), x + y = 2 (x/2 + y/2)
    (add-content), sum_B (2 x) y = 2 sum_B x y (einsum-scalar-out), EINSUM(x|dp, y|dp; B) =
    EINSUM(x, y; B)|dp (lift-shard-einsum), y 2 x = 2 x y, (2 x) y = 2 x y, 2 (1/2) x = x
    (mul-canon), y + x = x + y (add-canon), (2 x)[B -> C] = 2 x[B -> C] (rename-scalar-out),
    chunk 1 of 2 x = 2 (chunk 1 of x) (chunk-scalar-out)."""
    Bdp = [["B", ["dp"]]]
    B = [["B", []]]
    nodes = [
        ["INPUT", [], ["x", "data", "real"], B],                    # 0
        ["NEG", [0], [], B],                                         # 1
        ["CONST", [], [{"q": "-1/1"}], []],                          # 2
        ["MUL", [2, 0], [], B],                                      # 3
        ["POW", [0], [{"q": "1/1"}], B],                             # 4
        ["DIM_SIZE", [], ["B"], []],                                 # 5
        ["CONST", [], [{"q": "4/1"}], []],                           # 6
        ["RANK_CONST", [], ["dp", [{"q": "3/1"}, {"q": "3/1"}]], []],              # 7
        ["CONST", [], [{"q": "3/1"}], []],                           # 8
        ["ALL_REDUCE", [0], ["tp", "sum"], B],                       # 9
        ["ALL_REDUCE", [0], ["cp", "sum"], B],                       # 10
        ["CONST", [], [{"q": "3/1"}], []],                           # 11 (a twin of 8)
        ["MUL", [11, 0], [], B],                                     # 12
        ["ALL_REDUCE", [0], ["cp", "max"], B],                       # 13
        ["RANK_CONST", [], ["cp", [{"q": "1/1"}, {"q": "2/1"}, {"q": "3/1"}]], []],  # 14
        ["ALL_REDUCE", [14], ["cp", "max"], []],                     # 15
        ["INPUT", [], ["y", "data", "real"], B],                     # 16
        ["EINSUM", [0, 16], [[]], []],                               # 17: sum_B x y
        ["EINSUM", [16, 0], [[]], []],                               # 18: sum_B y x
        ["MUL", [0, 16], [], B],                                     # 19
        ["POW", [19], [{"q": "2/1"}], B],                            # 20
        ["POW", [0], [{"q": "2/1"}], B],                             # 21
        ["POW", [16], [{"q": "2/1"}], B],                            # 22
        ["MUL", [21, 22], [], B],                                    # 23
        ["CONST", [], [{"q": "2/1"}], []],                           # 24
        ["MUL", [24, 0], [], B],                                     # 25: 2 x
        ["EINSUM", [0], [["B"]], B],                                 # 26
        ["EINSUM", [0, 16], [["B"]], B],                             # 27
        ["ADD", [0, 16], [], B],                                     # 28
        ["CONST", [], [{"q": "1/2"}], []],                           # 29
        ["MUL", [29, 0], [], B],                                     # 30
        ["MUL", [29, 16], [], B],                                    # 31
        ["ADD", [30, 31], [], B],                                    # 32
        ["MUL", [24, 32], [], B],                                    # 33: 2 (x/2 + y/2)
        ["EINSUM", [25, 16], [[]], []],                              # 34: sum_B (2 x) y
        ["MUL", [24, 17], [], []],                                   # 35: 2 sum_B x y
        ["SHARD", [0], ["B", "dp"], Bdp],                            # 36
        ["SHARD", [16], ["B", "dp"], Bdp],                           # 37
        ["EINSUM", [36, 37], [["B"]], Bdp],                          # 38
        ["EINSUM", [0, 16], [["B"]], B],                             # 39
        ["SHARD", [39], ["B", "dp"], Bdp],                           # 40
        ["MUL", [16, 24, 0], [], B],                                 # 41: y 2 x
        ["MUL", [24, 0, 16], [], B],                                 # 42: 2 x y
        ["MUL", [25, 16], [], B],                                    # 43: (2 x) y
        ["CONST", [], [{"q": "1/2"}], []],                           # 44
        ["MUL", [24, 44, 0], [], B],                                 # 45: 2 (1/2) x
        ["ADD", [16, 0], [], B],                                     # 46: y + x
        ["RENAME", [25], ["B", "C"], [["C", []]]],                   # 47: (2 x)[B -> C]
        ["RENAME", [0], ["B", "C"], [["C", []]]],                    # 48
        ["MUL", [24, 48], [], [["C", []]]],                          # 49: 2 x[B -> C]
        ["CHUNK", [25], ["B", 2, 1], [["B", ["#1/2"]]]],             # 50: chunk 1 of 2 x
        ["CHUNK", [0], ["B", 2, 1], [["B", ["#1/2"]]]],              # 51
        ["MUL", [24, 51], [], [["B", ["#1/2"]]]],                    # 52: 2 (chunk 1 of x)
    ]
    steps = [
        {"kind": "rule", "rule": "neg-mul", "lhs": 1, "rhs": 3, "subst": {"x": {"node": 0}}},
        {"kind": "rule", "rule": "pow-one", "lhs": 4, "rhs": 0, "subst": {"x": {"node": 0}}},
        {"kind": "rule", "rule": "dim-size", "lhs": 5, "rhs": 6, "subst": {"d": "B"}},
        {"kind": "sym", "lhs": 3, "rhs": 1, "of": 0},
        {"kind": "rule", "rule": "rank-const-uniform", "lhs": 7, "rhs": 8, "subst": {"a": "dp"}},
        {"kind": "trans", "lhs": 4, "rhs": 0, "steps": [1]},
        {"kind": "rule", "rule": "allreduce-unit-axis", "lhs": 9, "rhs": 0,
         "subst": {"x": {"node": 0}, "a": "tp", "r": "sum"}},
        {"kind": "rule", "rule": "allreduce-sum-invariant", "lhs": 10, "rhs": 12,
         "subst": {"x": {"node": 0}, "a": "cp"}},
        {"kind": "rule", "rule": "allreduce-max-invariant", "lhs": 13, "rhs": 0,
         "subst": {"x": {"node": 0}, "a": "cp"}},
        {"kind": "rule", "rule": "einsum-canon", "lhs": 17, "rhs": 18,
         "subst": {"xs": {"nodes": [0, 16]}, "ys": {"nodes": [16, 0]}, "out": []}},
        {"kind": "rule", "rule": "pow-mul", "lhs": 20, "rhs": 23,
         "subst": {"xs": {"nodes": [0, 16]}, "e": {"q": "2/1"}}},
        {"kind": "rule", "rule": "einsum-identity", "lhs": 26, "rhs": 0,
         "subst": {"x": {"node": 0}, "out": ["B"]}},
        {"kind": "rule", "rule": "einsum-pointwise", "lhs": 27, "rhs": 19,
         "subst": {"xs": {"nodes": [0, 16]}, "out": ["B"]}},
        {"kind": "rule", "rule": "add-content", "lhs": 28, "rhs": 33,
         "subst": {"xs": {"nodes": [0, 16]}, "c": {"q": "2/1"}}},
        {"kind": "rule", "rule": "einsum-scalar-out", "lhs": 34, "rhs": 35,
         "subst": {"xs": {"nodes": [25, 16]}, "out": []}},
        {"kind": "rule", "rule": "lift-shard-einsum", "lhs": 38, "rhs": 40,
         "subst": {"xs": {"nodes": [0, 16]}, "mask": [True, True], "d": "B", "a": "dp",
                   "out": ["B"]}},
        {"kind": "rule", "rule": "mul-canon", "lhs": 41, "rhs": 42,
         "subst": {"xs": {"nodes": [16, 24, 0]}, "ys": {"nodes": [24, 0, 16]}}},
        {"kind": "rule", "rule": "mul-canon", "lhs": 43, "rhs": 42,
         "subst": {"xs": {"nodes": [25, 16]}, "ys": {"nodes": [24, 0, 16]}}},
        {"kind": "rule", "rule": "mul-canon", "lhs": 45, "rhs": 0,
         "subst": {"xs": {"nodes": [24, 44, 0]}, "ys": {"nodes": [0]}}},
        {"kind": "rule", "rule": "add-canon", "lhs": 28, "rhs": 46,
         "subst": {"xs": {"nodes": [0, 16]}, "ys": {"nodes": [16, 0]}}},
        {"kind": "rule", "rule": "rename-scalar-out", "lhs": 47, "rhs": 49,
         "subst": {"xs": {"nodes": [24, 0]}, "attrs": ["B", "C"], "nshards": []}},
        {"kind": "rule", "rule": "chunk-scalar-out", "lhs": 50, "rhs": 52,
         "subst": {"xs": {"nodes": [24, 0]}, "attrs": ["B", 2, 1]}},
    ]
    obs = [{"name": n, "kind": "loss", "method": "rewrite", "expected": e, "actual": a, "proof": p}
           for n, e, a, p in [("neg", 3, 1, 3), ("pow", 4, 0, 5), ("size", 5, 6, 2),
                              ("rank", 7, 8, 4), ("unit", 9, 0, 6), ("suminv", 10, 12, 7),
                              ("maxinv", 13, 0, 8), ("einsum", 17, 18, 9),
                              ("powmul", 20, 23, 10), ("ident", 26, 0, 11),
                              ("pointwise", 27, 19, 12), ("content", 28, 33, 13),
                              ("scalarout", 34, 35, 14), ("lifteinsum", 38, 40, 15),
                              ("mulcanon", 41, 42, 16), ("mulflat", 43, 42, 17),
                              ("mulconst", 45, 0, 18), ("addcanon", 28, 46, 19),
                              ("renamescalar", 47, 49, 20), ("chunkscalar", 50, 52, 21)]]
    return {"format": "shardproof-certificate", "format_version": 3, "verdict": "EQUIVALENT",
            "binding": {"B": 4, "C": 4, "dp": 2, "tp": 1, "cp": 3}, "nodes": nodes, "steps": steps,
            "obligations": obs,
            "plan": {"path": "small.py", "sha256": "0" * 64}}


# -- the rules of issue 17's second round, by hand -----------------------------------------------
def moves() -> dict:
    """x, y: (B, H), v: H; B = H = C = D = 4, |dp| = |tp| = 2, |cp| = 3, |sp| = 1. One
    instance of each rule whose lemma came after the first certificate (_small): lifting SHARD
    through CHUNK, RENAME (another dim and the block's own), CONCAT, REDUCE_MAX and another
    SHARD; the all-reduce of partial contractions; einsum-mul-canon, einsum-factor-out,
    pow-const, the collectives by their definitions, two all-reduces swapped, perm-identity,
    perm-compose, PERMUTE out of a sum, a contraction over blocks of an axis of size 1, a
    constant out of a concatenation, a scaled sum distributed and the positive integer power
    merge of mul-canon."""
    def d(*specs: tuple) -> list:
        return [[n, list(sh)] for n, sh in specs]
    BH, H = d(("B", ()), ("H", ())), d(("H", ()))
    Bdp_H = d(("B", ("dp",)), ("H", ()))
    q = lambda v: {"q": v}
    nodes = [
        ["INPUT", [], ["x", "data", "real"], BH],                         # 0
        ["INPUT", [], ["y", "data", "real"], BH],                         # 1
        ["SHARD", [0], ["B", "dp"], Bdp_H],                                # 2
        ["CHUNK", [2], ["H", 2, 1], d(("B", ("dp",)), ("H", ("#1/2",)))],  # 3
        ["CHUNK", [0], ["H", 2, 1], d(("B", ()), ("H", ("#1/2",)))],       # 4
        ["SHARD", [4], ["B", "dp"], d(("B", ("dp",)), ("H", ("#1/2",)))],  # 5
        ["RENAME", [2], ["H", "C"], d(("B", ("dp",)), ("C", ()))],         # 6
        ["RENAME", [0], ["H", "C"], d(("B", ()), ("C", ()))],              # 7
        ["SHARD", [7], ["B", "dp"], d(("B", ("dp",)), ("C", ()))],         # 8
        ["RENAME", [2], ["B", "D"], d(("D", ("dp",)), ("H", ()))],         # 9
        ["RENAME", [0], ["B", "D"], d(("D", ()), ("H", ()))],              # 10
        ["SHARD", [10], ["D", "dp"], d(("D", ("dp",)), ("H", ()))],        # 11
        ["CHUNK", [0], ["H", 2, 0], d(("B", ()), ("H", ("#0/2",)))],       # 12
        ["SHARD", [12], ["B", "dp"], d(("B", ("dp",)), ("H", ("#0/2",)))],  # 13
        ["CONCAT", [13, 5], ["H"], Bdp_H],                                 # 14
        ["CONCAT", [12, 4], ["H"], BH],                                    # 15
        ["SHARD", [15], ["B", "dp"], Bdp_H],                               # 16
        ["SHARD", [2], ["H", "tp"], d(("B", ("dp",)), ("H", ("tp",)))],    # 17
        ["SHARD", [0], ["H", "tp"], d(("B", ()), ("H", ("tp",)))],         # 18
        ["SHARD", [18], ["B", "dp"], d(("B", ("dp",)), ("H", ("tp",)))],   # 19
        ["SHARD", [1], ["B", "dp"], Bdp_H],                                # 20
        ["EINSUM", [2, 20], [["H"]], H],                                   # 21
        ["ALL_REDUCE", [21], ["dp", "sum"], H],                            # 22
        ["EINSUM", [0, 1], [["H"]], H],                                    # 23
        ["MUL", [0, 1], [], BH],                                           # 24
        ["EINSUM", [24], [["H"]], H],                                      # 25: sum_B (x y)
        ["EINSUM", [0, 1, 0], [["H"]], H],                                 # 26 (not used)
        ["INPUT", [], ["v", "param", "real"], H],                          # 27
        ["EINSUM", [27, 0], [["H"]], H],                                   # 28: sum_B v x
        ["EINSUM", [0], [["H"]], H],                                       # 29
        ["MUL", [27, 29], [], H],                                          # 30: v sum_B x
        ["CONST", [], [q("2/1")], []],                                     # 31
        ["POW", [31], [q("-2/1")], []],                                    # 32
        ["CONST", [], [q("1/4")], []],                                     # 33
        ["ADD", [0, 1], [], BH],                                           # 34
        ["ALL_REDUCE", [34], ["cp", "sum"], BH],                           # 35
        ["ALL_REDUCE", [0], ["cp", "sum"], BH],                            # 36
        ["ALL_REDUCE", [1], ["cp", "sum"], BH],                            # 37
        ["ADD", [36, 37], [], BH],                                         # 38
        ["ALL_REDUCE", [7], ["cp", "sum"], d(("B", ()), ("C", ()))],       # 39
        ["RENAME", [36], ["H", "C"], d(("B", ()), ("C", ()))],             # 40
        ["ALL_REDUCE", [4], ["cp", "max"], d(("B", ()), ("H", ("#1/2",)))],  # 41
        ["ALL_REDUCE", [0], ["cp", "max"], BH],                            # 42
        ["CHUNK", [42], ["H", 2, 1], d(("B", ()), ("H", ("#1/2",)))],      # 43
        ["REDUCE_SCATTER", [0], ["dp", "B"], Bdp_H],                       # 44
        ["ALL_REDUCE", [0], ["dp", "sum"], BH],                            # 45
        ["SHARD", [45], ["B", "dp"], Bdp_H],                               # 46
        ["BROADCAST", [0], ["dp", 0], BH],                                 # 47
        ["ALL_GATHER", [2], ["dp", "B"], BH],                              # 48
        ["ALL_REDUCE", [2], ["cp", "sum"], Bdp_H],                         # 49
        ["SHARD", [36], ["B", "dp"], Bdp_H],                               # 50
        ["SHARD", [0], ["H", "dp"], d(("B", ()), ("H", ("dp",)))],         # 51
        ["ALL_TO_ALL", [51], ["dp", "B", "H"], Bdp_H],                     # 52
        ["ALL_GATHER", [51], ["dp", "H"], BH],                             # 53
        ["SHARD", [53], ["B", "dp"], Bdp_H],                               # 54
        ["PERMUTE", [0], ["B", [0, 1]], BH],                               # 55
        ["RANK_CONST", [], ["cp", [q("1/1"), q("2/1"), q("3/1")]], []],    # 56
        ["MUL", [0, 56], [], BH],                                          # 57
        ["ALL_REDUCE", [57], ["cp", "sum"], BH],                           # 58
        ["ALL_REDUCE", [56], ["cp", "sum"], []],                           # 59
        ["MUL", [0, 59], [], BH],                                          # 60
        ["MUL", [0, 0], [], BH],                                           # 61: x x
        ["POW", [0], [q("2/1")], BH],                                      # 62: x^2
        ["ALL_REDUCE", [36], ["dp", "sum"], BH],                           # 63
        ["ALL_REDUCE", [45], ["cp", "sum"], BH],                           # 64
        ["PERMUTE", [0], ["B", [1, 0]], BH],                               # 65
        ["PERMUTE", [65], ["B", [1, 0]], BH],                              # 66
        ["PERMUTE", [0], ["B", [0, 1]], BH],                               # 67
        ["REDUCE_MAX", [2], [["H"]], d(("B", ("dp",)))],                   # 68
        ["REDUCE_MAX", [0], [["H"]], d(("B", ()))],                        # 69
        ["SHARD", [69], ["B", "dp"], d(("B", ("dp",)))],                   # 70
        ["SHARD", [0], ["B", "sp"], d(("B", ("sp",)), ("H", ()))],         # 71
        ["SHARD", [1], ["B", "sp"], d(("B", ("sp",)), ("H", ()))],         # 72
        ["EINSUM", [71, 72], [["H"]], H],                                  # 73
        ["CONST", [], [q("2/1")], []],                                     # 74
        ["CONST", [], [q("1/2")], []],                                     # 75
        ["MUL", [75, 12], [], d(("B", ()), ("H", ("#0/2",)))],             # 76
        ["MUL", [75, 4], [], d(("B", ()), ("H", ("#1/2",)))],              # 77
        ["CONCAT", [76, 77], ["H"], BH],                                   # 78
        ["MUL", [74, 78], [], BH],                                         # 79
        ["PERMUTE", [1], ["B", [1, 0]], BH],                               # 80
        ["ADD", [65, 80], [], BH],                                         # 81
        ["PERMUTE", [34], ["B", [1, 0]], BH],                              # 82
        ["MUL", [31, 34], [], BH],                                         # 83: 2 (x + y)
        ["ADD", [83, 0], [], BH],                                          # 84: 2 (x + y) + x
        ["MUL", [31, 0], [], BH],                                          # 85
        ["MUL", [31, 1], [], BH],                                          # 86
        ["ADD", [85, 86, 0], [], BH],                                      # 87: 2 x + 2 y + x
    ]
    rows = [("chunk", "lift-shard-chunk", 3, 5), ("rename", "lift-shard-rename", 6, 8),
            ("renameblock", "lift-shard-rename", 9, 11), ("concat", "lift-shard-concat", 14, 16),
            ("swap", "shard-swap", 17, 19), ("split", "allreduce-einsum-split", 22, 23),
            ("einsummul", "einsum-mul-canon", 25, 23), ("factorout", "einsum-factor-out", 28, 30),
            ("powconst", "pow-const", 32, 33), ("aradd", "allreduce-add", 35, 38),
            ("arrename", "allreduce-rename", 39, 40), ("archunk", "allreduce-chunk", 41, 43),
            ("rsdef", "reduce-scatter-def", 44, 46), ("bcast", "broadcast-invariant", 47, 0),
            ("agshard", "allgather-shard", 48, 0), ("arshard", "allreduce-shard-comm", 49, 50),
            ("a2a", "all-to-all-def", 52, 54), ("permid", "perm-identity", 55, 0),
            ("mulfactor", "allreduce-mul-factor", 58, 60), ("mulpow", "mul-canon", 61, 62),
            ("arswap", "allreduce-swap", 63, 64), ("permcompose", "perm-compose", 66, 67),
            ("liftmax", "lift-shard-reduce-max", 68, 70),
            ("unitaxis", "einsum-unit-axis", 73, 23), ("concatcontent", "concat-content", 15, 79),
            ("liftperm", "lift-perm-elementwise", 81, 82),
            ("scaledsum", "add-scaled-sum", 84, 87)]
    steps = [{"kind": "rule", "rule": rule, "lhs": lhs, "rhs": rhs,
              "subst": {"a": "sp"} if rule == "einsum-unit-axis" else {}}
             for _n, rule, lhs, rhs in rows]
    obs = [{"name": n, "kind": "loss", "method": "rewrite", "expected": lhs, "actual": rhs,
            "proof": k} for k, (n, _r, lhs, rhs) in enumerate(rows)]
    return {"format": "shardproof-certificate", "format_version": 3, "verdict": "EQUIVALENT",
            "binding": {"B": 4, "H": 4, "C": 4, "D": 4, "dp": 2, "tp": 2, "cp": 3, "sp": 1},
            "nodes": nodes, "steps": steps, "obligations": obs,
            "plan": {"path": "moves.py", "sha256": "0" * 64}}


# -- sign-guarded steps (RulesMerge.v, Signs.v) ---------------------------------------------------
def signs() -> dict:
    """x: B positive, w: B real, s = 1/100 + sum_B w^2 (positive). Steps whose guard is a sign
    fact: x^-1 x w = w, s^(-1/2) s^(-1/2) = s^-1 (mul-canon), (x^-1)^-1 = x^1,
    (s^(-1/2))^3 = s^(-3/2) (pow-pow), w + x^-1 - x^-1 = w (add-canon), sum_B x^-1 x w =
    sum_B w (einsum-mul-canon): Coq proves them from its sign analysis. sigmoid(w)^-1
    sigmoid(w) w = w (the Python analysis knows sigmoid > 0; Coq's semantics leaves SIGMOID
    arbitrary): a hypothesis. The same steps on w (w^-1 w x = x, (w^-1)^-1 = w^1,
    w + w^-1 - w^-1 = w: w may be 0) fail the rules' guards, in Python and in Coq."""
    B = [["B", []]]
    q = lambda v: {"q": v}
    nodes = [
        ["INPUT", [], ["x", "data", "positive"], B],                  # 0
        ["INPUT", [], ["w", "data", "real"], B],                      # 1
        ["POW", [0], [q("-1/1")], B],                                 # 2: x^-1
        ["MUL", [2, 0, 1], [], B],                                    # 3: x^-1 x w
        ["POW", [0], [q("1/1")], B],                                  # 4: x^1
        ["POW", [1], [q("2/1")], B],                                  # 5: w^2
        ["EINSUM", [5], [[]], []],                                    # 6: sum_B w^2
        ["CONST", [], [q("1/100")], []],                              # 7
        ["ADD", [7, 6], [], []],                                      # 8: s
        ["POW", [8], [q("-1/2")], []],                                # 9: s^(-1/2)
        ["MUL", [9, 9], [], []],                                      # 10
        ["POW", [8], [q("-1/1")], []],                                # 11: s^-1
        ["POW", [2], [q("-1/1")], B],                                 # 12: (x^-1)^-1
        ["CONST", [], [q("-1/1")], []],                               # 13
        ["MUL", [13, 2], [], B],                                      # 14: -x^-1
        ["ADD", [1, 2, 14], [], B],                                   # 15: w + x^-1 - x^-1
        ["POW", [9], [q("3/1")], []],                                 # 16: (s^(-1/2))^3
        ["POW", [8], [q("-3/2")], []],                                # 17: s^(-3/2)
        ["EINSUM", [2, 0, 1], [[]], []],                              # 18: sum_B x^-1 x w
        ["EINSUM", [1], [[]], []],                                    # 19: sum_B w
        ["SIGMOID", [1], [], B],                                      # 20
        ["POW", [20], [q("-1/1")], B],                                # 21
        ["MUL", [21, 20, 1], [], B],                                  # 22: sigmoid(w)^-1 sigmoid(w) w
        ["POW", [1], [q("-1/1")], B],                                 # 23: w^-1
        ["MUL", [23, 1, 0], [], B],                                   # 24: w^-1 w x
        ["POW", [23], [q("-1/1")], B],                                # 25: (w^-1)^-1
        ["MUL", [13, 23], [], B],                                     # 26: -w^-1
        ["ADD", [1, 23, 26], [], B],                                  # 27: w + w^-1 - w^-1
        ["POW", [1], [q("1/1")], B],                                  # 28: w^1
    ]
    ns = lambda *xs: {"nodes": list(xs)}
    rows = [("merge", "mul-canon", 3, 1, {"xs": ns(2, 0, 1), "ys": ns(1)}),
            ("rsqrt", "mul-canon", 10, 11, {"xs": ns(9, 9), "ys": ns(11)}),
            ("powpow", "pow-pow", 12, 4, {"x": {"node": 0}, "a": q("-1/1"), "b": q("-1/1")}),
            ("powfrac", "pow-pow", 16, 17, {"x": {"node": 8}, "a": q("-1/2"), "b": q("3/1")}),
            ("drop", "add-canon", 15, 1, {"xs": ns(1, 2, 14), "ys": ns(1)}),
            ("einsummerge", "einsum-mul-canon", 18, 19,
             {"xs": ns(2, 0, 1), "ys": ns(1), "out": []}),
            ("sigmoid", "mul-canon", 22, 1, {"xs": ns(21, 20, 1), "ys": ns(1)}),
            ("wmerge", "mul-canon", 24, 0, {"xs": ns(23, 1, 0), "ys": ns(0)}),
            ("wpowpow", "pow-pow", 25, 28, {"x": {"node": 1}, "a": q("-1/1"), "b": q("-1/1")}),
            ("wdrop", "add-canon", 27, 1, {"xs": ns(1, 23, 26), "ys": ns(1)})]
    steps = [{"kind": "rule", "rule": rule, "lhs": lhs, "rhs": rhs, "subst": sub}
             for _n, rule, lhs, rhs, sub in rows]
    obs = [{"name": n, "kind": "loss", "method": "rewrite", "expected": lhs, "actual": rhs,
            "proof": k} for k, (n, _r, lhs, rhs, _s) in enumerate(rows)]
    return {"format": "shardproof-certificate", "format_version": 3, "verdict": "EQUIVALENT",
            "binding": {"B": 4}, "nodes": nodes, "steps": steps, "obligations": obs,
            "plan": {"path": "signs.py", "sha256": "0" * 64}}


# -- the rules the dp example needed last (RulesShift, RulesActivation, RulesOneHot, ...) ----------
def rounds3() -> dict:
    """x, y: (B, V) real, w: B real, lab: B index over V; |dp| = |tp| = 2, |sp| = 1. One
    instance of exp-max-shift, silu-def, reduce-max-unit-axis, pow-const (exponent -1/2),
    pow-const-factor, einsum-nested, add-max-factor-out, lift-shard-onehot and
    onehot-shard-out, each an obligation."""
    def d(*specs: tuple) -> list:
        return [[n, list(sh)] for n, sh in specs]
    BV, B_, E = d(("B", ()), ("V", ())), d(("B", ())), []
    q = lambda v: {"q": v}
    nodes = [
        ["INPUT", [], ["x", "data", "real"], BV],                       # 0
        ["INPUT", [], ["y", "data", "real"], BV],                       # 1
        ["INPUT", [], ["w", "data", "real"], B_],                       # 2
        ["INPUT", [], ["lab", "data", "index", "V"], B_],               # 3
        ["REDUCE_MAX", [0], [["V"]], B_],                               # 4: m = max_V x
        ["EXP", [0], [], BV],                                           # 5
        ["CONST", [], [q("1/1")], E],                                   # 6
        ["MUL", [6, 4], [], B_],                                        # 7: 1 m
        ["ADD", [0, 7], [], BV],                                        # 8: x + m
        ["EXP", [8], [], BV],                                           # 9
        ["EXP", [4], [], B_],                                           # 10: exp m
        ["POW", [10], [q("-1/1")], B_],                                 # 11
        ["MUL", [9, 11], [], BV],                                       # 12: exp(x + m) exp(m)^-1
        ["SILU", [1], [], BV],                                          # 13
        ["SIGMOID", [1], [], BV],                                       # 14
        ["MUL", [1, 14], [], BV],                                       # 15: y sigmoid(y)
        ["SHARD", [0], ["V", "sp"], d(("B", ()), ("V", ("sp",)))],      # 16
        ["REDUCE_MAX", [16], [["V"]], B_],                              # 17
        ["CONST", [], [q("4/1")], E],                                   # 18
        ["POW", [18], [q("-1/2")], E],                                  # 19: 4^(-1/2)
        ["CONST", [], [q("1/2")], E],                                   # 20
        ["CONST", [], [q("1/16")], E],                                  # 21
        ["MUL", [21, 2], [], B_],                                       # 22: w / 16
        ["POW", [22], [q("-1/2")], B_],                                 # 23
        ["POW", [2], [q("-1/2")], B_],                                  # 24
        ["MUL", [18, 24], [], B_],                                      # 25: 4 w^(-1/2)
        ["EINSUM", [0, 1], [["B"]], B_],                                # 26: sum_V x y
        ["EINSUM", [26, 2], [[]], E],                                   # 27: sum_B (sum_V x y) w
        ["EINSUM", [0, 1, 2], [[]], E],                                 # 28: sum_B,V x y w
        ["MUL", [0, 10], [], BV],                                       # 29: x exp(m)
        ["MUL", [1, 10], [], BV],                                       # 30: y exp(m)
        ["ADD", [29, 30], [], BV],                                      # 31
        ["ADD", [0, 1], [], BV],                                        # 32
        ["MUL", [10, 32], [], BV],                                      # 33: exp(m) (x + y)
        ["SHARD", [3], ["B", "dp"], d(("B", ("dp",)))],                 # 34
        ["ONE_HOT", [34], ["V"], d(("B", ("dp",)), ("V", ()))],         # 35
        ["ONE_HOT", [3], ["V"], BV],                                    # 36
        ["SHARD", [36], ["B", "dp"], d(("B", ("dp",)), ("V", ()))],     # 37
        ["ONE_HOT", [3], ["V"], d(("B", ()), ("V", ("tp",)))],          # 38
        ["SHARD", [36], ["V", "tp"], d(("B", ()), ("V", ("tp",)))],     # 39
    ]
    ns = lambda *xs: {"nodes": list(xs)}
    rows = [("expshift", "exp-max-shift", 5, 12, {"y": {"node": 0}, "m": {"node": 4}, "c": q("-1/1")}),
            ("silu", "silu-def", 13, 15, {"x": {"node": 1}}),
            ("maxunit", "reduce-max-unit-axis", 17, 4,
             {"x": {"node": 0}, "d": "V", "a": "sp", "dims": ["V"]}),
            ("powfrac", "pow-const", 19, 20, {"c": q("4/1"), "e": q("-1/2")}),
            ("constfactor", "pow-const-factor", 23, 25, {"xs": ns(21, 2), "k": 0, "e": q("-1/2")}),
            ("nested", "einsum-nested", 27, 28, {"xs": ns(26, 2), "k": 0, "out": []}),
            ("maxfactor", "add-max-factor-out", 31, 33, {"f": {"node": 10}, "xs": ns(29, 30)}),
            ("liftonehot", "lift-shard-onehot", 35, 37,
             {"x": {"node": 3}, "d": "B", "a": "dp", "v": "V", "vshards": []}),
            ("onehotout", "onehot-shard-out", 38, 39, {"idx": {"node": 3}, "v": "V", "vshards": ["tp"]})]
    steps = [{"kind": "rule", "rule": rule, "lhs": lhs, "rhs": rhs, "subst": sub}
             for _n, rule, lhs, rhs, sub in rows]
    obs = [{"name": n, "kind": "loss", "method": "rewrite", "expected": lhs, "actual": rhs,
            "proof": k} for k, (n, _r, lhs, rhs, _s) in enumerate(rows)]
    return {"format": "shardproof-certificate", "format_version": 3, "verdict": "EQUIVALENT",
            "binding": {"B": 4, "V": 4, "dp": 2, "tp": 2, "sp": 1}, "nodes": nodes,
            "steps": steps, "obligations": obs, "plan": {"path": "rounds3.py", "sha256": "0" * 64}}


# -- the rules of the frontier, context-parallel and MoE certificates (RulesGather ... RulesUnit) --
def rounds4() -> dict:
    """x, y: (B, H) real, v: H real, lab: B index over V; B = H = C = D = V = 4, |dp| = |tp| = 2,
    |cp| = 3, |sp| = 1; o = (1, 0), two blocks. One instance of each rule whose lemma came with
    the fourth round: allreduce-max-shard, allgather-shard-comm, the PERMUTE rules (lifted
    through EINSUM, REDUCE_MAX, CHUNK, SHARD, RENAME of the permuted dim and of another,
    ONE_HOT, CONCAT; out of a sum and a max; two permutations swapped; under an all-reduce),
    lift-shard-topk, lift-perm-topk (with and without an eligibility mask), lift-shard-shift, allreduce-einsum-push, allreduce-concat,
    allreduce-allgather-comm, allgather-unit-axis and allreduce-rank-const, each an obligation."""
    def d(*specs: tuple) -> list:
        return [[n, list(sh)] for n, sh in specs]
    BH, B_, H_ = d(("B", ()), ("H", ())), d(("B", ())), d(("H", ()))
    Htp = d(("B", ()), ("H", ("tp",)))
    H0, H1 = d(("B", ()), ("H", ("#0/2",))), d(("B", ()), ("H", ("#1/2",)))
    q = lambda v: {"q": v}
    o = [1, 0]
    nodes = [
        ["INPUT", [], ["x", "data", "real"], BH],                         # 0
        ["INPUT", [], ["y", "data", "real"], BH],                         # 1
        ["SHARD", [0], ["H", "tp"], Htp],                                  # 2
        ["REDUCE_MAX", [2], [["H"]], B_],                                  # 3
        ["ALL_REDUCE", [3], ["tp", "max"], B_],                            # 4
        ["REDUCE_MAX", [0], [["H"]], B_],                                  # 5: max_H x
        ["SHARD", [2], ["B", "dp"], d(("B", ("dp",)), ("H", ("tp",)))],    # 6
        ["ALL_GATHER", [6], ["tp", "H"], d(("B", ("dp",)), ("H", ()))],    # 7
        ["ALL_GATHER", [2], ["tp", "H"], BH],                              # 8
        ["SHARD", [8], ["B", "dp"], d(("B", ("dp",)), ("H", ()))],         # 9
        ["SHARD", [1], ["H", "tp"], Htp],                                  # 10 (not used)
        ["INPUT", [], ["v", "param", "real"], H_],                         # 11
        ["PERMUTE", [0], ["B", o], BH],                                    # 12: P(x)
        ["EINSUM", [12, 11], [["B"]], B_],                                 # 13
        ["EINSUM", [0, 11], [["B"]], B_],                                  # 14
        ["PERMUTE", [14], ["B", o], B_],                                   # 15
        ["PERMUTE", [1], ["B", o], BH],                                    # 16: P(y)
        ["EINSUM", [12, 16], [["H"]], H_],                                 # 17
        ["EINSUM", [0, 1], [["H"]], H_],                                   # 18
        ["REDUCE_MAX", [12], [["H"]], B_],                                 # 19
        ["PERMUTE", [5], ["B", o], B_],                                    # 20
        ["CHUNK", [12], ["H", 2, 1], H1],                                  # 21
        ["CHUNK", [0], ["H", 2, 1], H1],                                   # 22
        ["PERMUTE", [22], ["B", o], H1],                                   # 23
        ["PERMUTE", [2], ["B", o], Htp],                                   # 24
        ["SHARD", [12], ["H", "tp"], Htp],                                 # 25
        ["RENAME", [12], ["B", "C"], d(("C", ()), ("H", ()))],             # 26
        ["RENAME", [0], ["B", "C"], d(("C", ()), ("H", ()))],              # 27
        ["PERMUTE", [27], ["C", o], d(("C", ()), ("H", ()))],              # 28
        ["RENAME", [12], ["H", "D"], d(("B", ()), ("D", ()))],             # 29
        ["RENAME", [0], ["H", "D"], d(("B", ()), ("D", ()))],              # 30
        ["PERMUTE", [30], ["B", o], d(("B", ()), ("D", ()))],              # 31
        ["INPUT", [], ["lab", "data", "index", "V"], B_],                  # 32
        ["PERMUTE", [32], ["B", o], B_],                                   # 33
        ["ONE_HOT", [33], ["V"], d(("B", ()), ("V", ()))],                 # 34
        ["ONE_HOT", [32], ["V"], d(("B", ()), ("V", ()))],                 # 35
        ["PERMUTE", [35], ["B", o], d(("B", ()), ("V", ()))],              # 36
        ["CHUNK", [0], ["H", 2, 0], H0],                                   # 37
        ["PERMUTE", [37], ["B", o], H0],                                   # 38
        ["PERMUTE", [1], ["H", o], BH],                                    # 39 (not used)
        ["CONCAT", [38, 23], ["H"], BH],                                   # 40
        ["CONCAT", [37, 22], ["H"], BH],                                   # 41
        ["PERMUTE", [41], ["B", o], BH],                                   # 42
        ["REDUCE_MAX", [12], [["B"]], H_],                                 # 43
        ["REDUCE_MAX", [0], [["B"]], H_],                                  # 44
        ["SHARD", [0], ["B", "dp"], d(("B", ("dp",)), ("H", ()))],         # 45
        ["TOPK_MASK", [45], ["H", 2], d(("B", ("dp",)), ("H", ()))],       # 46
        ["TOPK_MASK", [0], ["H", 2], BH],                                  # 47
        ["SHARD", [47], ["B", "dp"], d(("B", ("dp",)), ("H", ()))],        # 48
        ["RANK_CONST", [], ["tp", [q("1/1"), q("2/1")]], []],              # 49
        ["EINSUM", [11, 49], [["H"]], H_],                                 # 50
        ["ALL_REDUCE", [50], ["tp", "sum"], H_],                           # 51
        ["ALL_REDUCE", [49], ["tp", "sum"], []],                           # 52
        ["EINSUM", [11, 52], [["H"]], H_],                                 # 53
        ["PERMUTE", [12], ["H", o], BH],                                   # 54
        ["PERMUTE", [0], ["H", o], BH],                                    # 55
        ["PERMUTE", [55], ["B", o], BH],                                   # 56
        ["ALL_REDUCE", [12], ["cp", "sum"], BH],                           # 57
        ["ALL_REDUCE", [0], ["cp", "sum"], BH],                            # 58
        ["PERMUTE", [58], ["B", o], BH],                                   # 59
        ["ALL_REDUCE", [41], ["cp", "max"], BH],                           # 60
        ["ALL_REDUCE", [37], ["cp", "max"], H0],                           # 61
        ["ALL_REDUCE", [22], ["cp", "max"], H1],                           # 62
        ["CONCAT", [61, 62], ["H"], BH],                                   # 63
        ["SHARD", [0], ["H", "sp"], d(("B", ()), ("H", ("sp",)))],         # 64
        ["ALL_GATHER", [64], ["sp", "H"], BH],                             # 65
        ["RANK_CONST", [], ["cp", [q("1/1"), q("2/1"), q("3/1")]], []],    # 66
        ["ALL_REDUCE", [66], ["cp", "sum"], []],                           # 67
        ["CONST", [], [q("6/1")], []],                                     # 68
        ["TOPK_MASK", [12], ["H", 2], BH],                                 # 69
        ["PERMUTE", [47], ["B", o], BH],                                   # 70
        ["ALL_REDUCE", [8], ["cp", "sum"], BH],                            # 71
        ["ALL_REDUCE", [2], ["cp", "sum"], Htp],                           # 72
        ["ALL_GATHER", [72], ["tp", "H"], BH],                             # 73
        ["SHIFT", [45], ["H"], d(("B", ("dp",)), ("H", ()))],              # 74
        ["SHIFT", [0], ["H"], BH],                                         # 75
        ["SHARD", [75], ["B", "dp"], d(("B", ("dp",)), ("H", ()))],        # 76
        ["SHARD", [1], ["B", "dp"], d(("B", ("dp",)), ("H", ()))],         # 77
        ["TOPK_MASK", [45, 77], ["H", 2], d(("B", ("dp",)), ("H", ()))],   # 78
        ["TOPK_MASK", [0, 1], ["H", 2], BH],                               # 79: y eligible
        ["SHARD", [79], ["B", "dp"], d(("B", ("dp",)), ("H", ()))],        # 80
        ["TOPK_MASK", [12, 16], ["H", 2], BH],                             # 81
        ["PERMUTE", [79], ["B", o], BH],                                   # 82
    ]
    ns = lambda *xs: {"nodes": list(xs)}
    x = {"node": 0}
    rows = [("armaxshard", "allreduce-max-shard", 4, 5, {"x": x, "d": "H", "a": "tp", "dims": ["H"]}),
            ("agcomm", "allgather-shard-comm", 7, 9,
             {"x": {"node": 2}, "e": "B", "b": "dp", "a": "tp", "d": "H"}),
            ("permeinsum", "lift-perm-einsum", 13, 15,
             {"xs": ns(0, 11), "mask": [True, False], "d": "B", "o": o, "out": ["B"]}),
            ("permcontract", "einsum-perm-contract", 17, 18,
             {"xs": ns(0, 1), "mask": [True, True], "d": "B", "o": o, "out": ["H"]}),
            ("permmax", "lift-perm-reduce-max", 19, 20, {"x": x, "d": "B", "o": o, "dims": ["H"]}),
            ("permchunk", "lift-perm-chunk", 21, 23,
             {"x": x, "d": "B", "o": o, "cd": "H", "parts": 2, "index": 1}),
            ("shardperm", "lift-shard-permute", 24, 25, {"x": x, "e": "H", "a": "tp", "d": "B", "o": o}),
            ("permrenameown", "lift-perm-rename", 26, 28,
             {"x": x, "d": "B", "o": o, "old": "B", "new": "C", "nshards": []}),
            ("permrename", "lift-perm-rename", 29, 31,
             {"x": x, "d": "B", "o": o, "old": "H", "new": "D", "nshards": []}),
            ("permonehot", "lift-perm-onehot", 34, 36,
             {"x": {"node": 32}, "d": "B", "o": o, "v": "V", "vshards": []}),
            ("permconcat", "lift-perm-concat", 40, 42,
             {"xs": ns(37, 22), "d": "B", "o": o, "cd": "H", "cshards": []}),
            ("maxperm", "reduce-max-perm", 43, 44, {"x": x, "d": "B", "o": o, "dims": ["B"]}),
            ("topk", "lift-shard-topk", 46, 48, {"x": x, "d": "B", "a": "dp", "e": "H", "k": 2}),
            ("push", "allreduce-einsum-push", 51, 53, {"xs": ns(11, 49), "a": "tp", "out": ["H"]}),
            ("permswap", "perm-swap", 54, 56, {"x": x, "d1": "B", "o1": o, "d2": "H", "o2": o}),
            ("arperm", "allreduce-permute", 57, 59, {"x": x, "d": "B", "o": o, "a": "cp", "r": "sum"}),
            ("arconcat", "allreduce-concat", 60, 63,
             {"xs": ns(37, 22), "a": "cp", "r": "max", "attrs": ["H"], "cshards": []}),
            ("agunit", "allgather-unit-axis", 65, 0, {"x": x, "a": "sp", "d": "H"}),
            ("rankconst", "allreduce-rank-const", 67, 68,
             {"a": "cp", "values": [q("1/1"), q("2/1"), q("3/1")]}),
            ("permtopk", "lift-perm-topk", 69, 70, {"x": x, "d": "B", "o": o, "e": "H", "k": 2}),
            ("aragcomm", "allreduce-allgather-comm", 71, 73,
             {"x": {"node": 2}, "a": "cp", "r": "sum", "b": "tp", "d": "H"}),
            ("shardshift", "lift-shard-shift", 74, 76, {"x": x, "d": "B", "a": "dp", "e": "H"}),
            ("topkelig", "lift-shard-topk-elig", 78, 80,
             {"x": x, "el": {"node": 1}, "d": "B", "a": "dp", "e": "H", "k": 2}),
            ("permtopkelig", "lift-perm-topk-elig", 81, 82,
             {"x": x, "el": {"node": 1}, "d": "B", "o": o, "e": "H", "k": 2})]
    steps = [{"kind": "rule", "rule": rule, "lhs": lhs, "rhs": rhs, "subst": sub}
             for _n, rule, lhs, rhs, sub in rows]
    obs = [{"name": n, "kind": "loss", "method": "rewrite", "expected": lhs, "actual": rhs,
            "proof": k} for k, (n, _r, lhs, rhs, _s) in enumerate(rows)]
    return {"format": "shardproof-certificate", "format_version": 3, "verdict": "EQUIVALENT",
            "binding": {"B": 4, "H": 4, "C": 4, "D": 4, "V": 4, "dp": 2, "tp": 2, "cp": 3, "sp": 1},
            "nodes": nodes, "steps": steps, "obligations": obs,
            "plan": {"path": "rounds4.py", "sha256": "0" * 64}}
