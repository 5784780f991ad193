"""Collective elimination: rewrite collectives away by their definitions.

``ALL_REDUCE(x, a, sum)`` is the sum of ``x`` over the coordinates of ``a``. It disappears when
``x`` does not vary over ``a`` (``|a| * x``), when ``x`` is this rank's addend (``PART``), when
``x`` is a contraction whose summed dim is split over ``a`` (row-parallel matmul, data-parallel
gradient, micro-batch accumulation), and it moves inward through sums, non-varying factors and
linear movement. ``ALL_REDUCE(., max)`` of a max over a split dim is the max over the whole dim.
``ALL_GATHER`` of a block is the tensor; ``REDUCE_SCATTER`` is a block of an ``ALL_REDUCE``;
``BROADCAST`` of a replicated value is the value.

Every split rule is guarded by shapes: the same dim, the same axis, the same spec of the dim in
every operand (so an unguarded "row-parallel" rule cannot prove a 2/6 versus 4/4 split).
"""

from __future__ import annotations


from fractions import Fraction

from spec_lang.term import Binding, DimSpec, Op, Term, term

from rewriting import build as b
from rewriting.instances import draw_binding, draw_const, fresh
from rewriting.lifting import _join, _split, _tops, lift_ok
from rewriting.rule import Draw, Rule, Subst, always, register

__all__: list[str] = []

_AR = {Op.ALL_REDUCE}


def _rule(name: str, law: str, guard_doc: str, ops: set[Op], match, lhs, rhs, guard,
          sample) -> Rule:
    return register(Rule(name, law, guard_doc, frozenset(ops), match, lhs, rhs, guard, sample,
                         group="collectives"))


def _ar(t: Term) -> tuple[Term, str, str]:
    return t.args[0], t.attrs[0], t.attrs[1]


def _var(x: Term, a: str) -> bool:
    return a in b.varying(x)


def blocks_over(x: Term, a: str) -> bool:
    """Some dim of ``x`` is sharded over ``a`` (then a sum over ``a`` would add different blocks:
    moving an ALL_REDUCE onto such an operand never helps, the outer context must split it)."""
    return any(a in d.shards for d in x.dims)


def _sum_only(f):
    def match(t: Term, bd: Binding) -> Subst | None:
        return f(t, bd) if t.attrs[1] == "sum" else None
    return match


# ---------------------------------------------------------------------------------------------
def _sample_inv(reduce: str):
    def sample(draw: Draw) -> tuple[Term, Binding]:
        x = fresh(["B", "H"])
        if draw.bool():
            x = b.shard(x, "H", "tp")  # varies over tp, not over the reduced axis
        return b.all_reduce(x, draw.choice(["dp", "mb"]), reduce), draw_binding(draw)
    return sample


# a replicated value summed over |a| coordinates is |a| times the value
_rule("allreduce-sum-invariant", "ALL_REDUCE(x, a, sum) = MUL(CONST(|a|), x)",
      "x does not vary over a", _AR,
      match=lambda t, bd: ({"x": t.args[0], "a": t.attrs[0]}
                           if t.attrs[1] == "sum" and not _var(t.args[0], t.attrs[0]) else None),
      lhs=lambda s: b.all_reduce(s["x"], s["a"], "sum"),
      rhs=lambda s, bd: b.mul(b.const(bd[s["a"]]), s["x"]),
      guard=lambda s, bd: not _var(s["x"], s["a"]), sample=_sample_inv("sum"))

# the max of copies is the value
_rule("allreduce-max-invariant", "ALL_REDUCE(x, a, max) = x", "x does not vary over a", _AR,
      match=lambda t, bd: ({"x": t.args[0], "a": t.attrs[0]}
                           if t.attrs[1] == "max" and not _var(t.args[0], t.attrs[0]) else None),
      lhs=lambda s: b.all_reduce(s["x"], s["a"], "max"), rhs=lambda s, bd: s["x"],
      guard=lambda s, bd: not _var(s["x"], s["a"]), sample=_sample_inv("max"))


def _sample_part(draw: Draw) -> tuple[Term, Binding]:
    return b.all_reduce(b.part(fresh(["B", "H"]), "tp"), "tp"), draw_binding(draw)


# the addends of a Partial(sum) sum to the value
_rule("allreduce-part", "ALL_REDUCE(PART(x, a), a, sum) = x", "x does not vary over a", _AR,
      match=lambda t, bd: ({"x": t.args[0].args[0], "a": t.attrs[0]}
                           if t.attrs[1] == "sum" and t.args[0].op is Op.PART
                           and t.args[0].attrs[0] == t.attrs[0] else None),
      lhs=lambda s: b.all_reduce(b.part(s["x"], s["a"]), s["a"], "sum"),
      rhs=lambda s, bd: s["x"], guard=lambda s, bd: not _var(s["x"], s["a"]),
      sample=_sample_part)


def _sample_ar_rank_const(draw: Draw) -> tuple[Term, Binding]:
    bd = draw_binding(draw)
    a = draw.choice(["dp", "tp", "mb"])
    vals = tuple(Fraction(draw.int(-5, 5), draw.int(1, 4)) for _ in range(bd[a]))
    return b.all_reduce(term(Op.RANK_CONST, (), (a, vals), ()), a), bd


def _total(values: tuple) -> object:
    out: object = Fraction(0)
    for v in values:
        out = b.num_add(out, b.num(v))
    return out


def _ar_rank_const_ok(s: Subst, bd: Binding) -> bool:
    return s["a"] in bd and len(s["values"]) == bd[s["a"]]


# the sum over a of a per-rank constant on a is the sum of its values (a stage selector summed
# over the pipeline axis, a micro-batch weight summed over mb)
_rule("allreduce-rank-const", "ALL_REDUCE(RANK_CONST(a, vs), a, sum) = CONST(sum(vs))",
      "|vs| == |a|", _AR,
      match=_sum_only(lambda t, bd: (
          {"a": t.attrs[0], "values": t.args[0].attrs[1]}
          if t.args[0].op is Op.RANK_CONST and t.args[0].attrs[0] == t.attrs[0]
          and _ar_rank_const_ok({"a": t.attrs[0], "values": t.args[0].attrs[1]}, bd)
          else None)),
      lhs=lambda s: b.all_reduce(term(Op.RANK_CONST, (), (s["a"], s["values"]), ()), s["a"],
                                 "sum"),
      rhs=lambda s, bd: b.const(_total(s["values"])),
      guard=_ar_rank_const_ok, sample=_sample_ar_rank_const)


def _shard_comm_ok(s: Subst, bd: Binding) -> bool:
    return (s["b"] != s["a"] and not _var(s["x"], s["b"]) and s["d"] in s["x"].dim_names
            and not blocks_over(s["x"], s["a"]))


def _match_shard_comm(t: Term, bd: Binding) -> Subst | None:
    x, a, r = _ar(t)
    if x.op is not Op.SHARD:
        return None
    s = {"x": x.args[0], "d": x.attrs[0], "b": x.attrs[1], "a": a, "r": r}
    return s if _shard_comm_ok(s, bd) else None


def _sample_shard_comm(draw: Draw) -> tuple[Term, Binding]:
    x = b.part(fresh(["B", "H"]), "tp")
    return b.all_reduce(b.shard(x, "B", "dp"), "tp", draw.choice(["sum", "max"])), \
        draw_binding(draw)


# reducing over a commutes with taking a block over another axis b
_rule("allreduce-shard-comm", "ALL_REDUCE(SHARD(x, d, b), a, r) = SHARD(ALL_REDUCE(x, a, r), d, b)",
      "b != a; no dim of x is sharded over a", _AR, match=_match_shard_comm,
      lhs=lambda s: b.all_reduce(b.shard(s["x"], s["d"], s["b"]), s["a"], s["r"]),
      rhs=lambda s, bd: b.shard(b.all_reduce(s["x"], s["a"], s["r"]), s["d"], s["b"]),
      guard=_shard_comm_ok, sample=_sample_shard_comm)


def _sample_ar_add(draw: Draw) -> tuple[Term, Binding]:
    x, y = b.part(fresh(["B", "H"]), "tp"), fresh(["H"])
    return b.all_reduce(b.add(*sorted([x, y], key=b.skey)), "tp"), draw_binding(draw)


# a sum of sums is the sum of the sums
_rule("allreduce-add", "ALL_REDUCE(ADD(xs), a, sum) = ADD(ALL_REDUCE(x, a, sum) for x in xs)", "",
      _AR, match=_sum_only(lambda t, bd: ({"xs": t.args[0].args, "a": t.attrs[0]}
                                          if t.args[0].op is Op.ADD else None)),
      lhs=lambda s: b.all_reduce(b.add(*s["xs"]), s["a"], "sum"),
      rhs=lambda s, bd: b.add(*[b.all_reduce(x, s["a"], "sum") for x in s["xs"]]),
      guard=always, sample=_sample_ar_add)


def _mul_parts(s: Subst) -> tuple[list[Term], list[Term]]:
    fixed = [x for x in s["xs"] if not _var(x, s["a"])]
    vary = [x for x in s["xs"] if _var(x, s["a"])]
    return fixed, vary


def _mul_factor_rhs(s: Subst, bd: Binding) -> Term:
    fixed, vary = _mul_parts(s)
    inner = vary[0] if len(vary) == 1 else b.mul(*vary)
    return b.mul(*fixed, b.all_reduce(inner, s["a"], "sum"))


def _mul_factor_ok(s: Subst, bd: Binding) -> bool:
    fixed, vary = _mul_parts(s)
    return bool(fixed) and bool(vary)


def _sample_mul_factor(draw: Draw) -> tuple[Term, Binding]:
    x = b.part(fresh(["B", "H"]), "tp")
    c = draw_const(draw) if draw.bool() else fresh(["H"])
    return b.all_reduce(b.mul(*sorted([c, x], key=b.skey)), "tp"), draw_binding(draw)


# factors that do not vary over a leave the sum over a
_rule("allreduce-mul-factor",
      "ALL_REDUCE(MUL(xs), a, sum) = MUL(fixed..., ALL_REDUCE(MUL(vary...), a, sum))",
      "fixed = the xs not varying over a (non-empty), vary = the others (non-empty; one: itself)",
      _AR, match=_sum_only(lambda t, bd: (
          {"xs": t.args[0].args, "a": t.attrs[0]}
          if t.args[0].op is Op.MUL and _mul_factor_ok({"xs": t.args[0].args, "a": t.attrs[0]}, bd)
          else None)),
      lhs=lambda s: b.all_reduce(b.mul(*s["xs"]), s["a"], "sum"),
      rhs=_mul_factor_rhs, guard=_mul_factor_ok, sample=_sample_mul_factor)


# ---------------------------------------------------------------------------------------------
# contractions
def _match_split(t: Term, bd: Binding) -> Subst | None:
    e, a, r = _ar(t)
    if r != "sum" or e.op is not Op.EINSUM:
        return None
    out = e.attrs[0]
    for d, aa in _tops(e.args):
        if aa != a or d in out:
            continue
        xs, mask = _split(e.args, d, a)
        if lift_ok(xs, mask, d, a):
            return {"xs": xs, "mask": mask, "d": d, "a": a, "out": out}
    return None


def _split_ok(s: Subst, bd: Binding) -> bool:
    return s["d"] not in s["out"] and lift_ok(s["xs"], s["mask"], s["d"], s["a"])


def _sample_split(draw: Draw) -> tuple[Term, Binding]:
    k = draw.int(0, 3)
    if k == 0:  # row-parallel linear: contract F split over tp
        x, w = fresh(["B", "F"]), fresh(["F", "H"])
        args, out, a = [b.shard(x, "F", "tp"), b.shard(w, "F", "tp")], ("B", "H"), "tp"
    elif k == 1:  # data-parallel weight gradient: contract B split over dp
        x, g = fresh(["B", "H"]), fresh(["B", "F"])
        args, out, a = [b.shard(x, "B", "dp"), b.shard(g, "B", "dp")], ("F", "H"), "dp"
    elif k == 2:  # micro-batches inside data parallel: B[dp, mb], reduce mb first
        x, g = fresh(["B", "H"]), fresh(["B", "F"])
        args = [b.shard(b.shard(x, "B", "dp"), "B", "mb"), b.shard(b.shard(g, "B", "dp"), "B", "mb")]
        out, a = ("F", "H"), "mb"
    else:  # a token count: sum of a sharded mask
        m = fresh(["B", "S"], domain="mask")
        args, out, a = [b.shard(m, "S", "cp")], (), "cp"
    return b.all_reduce(b.einsum(sorted(args, key=b.skey), out), a), draw_binding(draw)


# summing over a the partial contractions of blocks along a contracted dim d is the contraction
_rule("allreduce-einsum-split",
      "ALL_REDUCE(EINSUM(..SHARD(x_i, d, a)..y_j.., out), a, sum) = EINSUM(..x_i..y_j.., out)",
      "d not in out; the blocks share d's spec; no x_i, y_j varies over a; the y_j lack d",
      _AR, match=_match_split,
      lhs=lambda s: b.all_reduce(b.einsum(_join(s["xs"], s["mask"], s["d"], s["a"]), s["out"]),
                                 s["a"], "sum"),
      rhs=lambda s, bd: b.einsum(s["xs"], s["out"]), guard=_split_ok, sample=_sample_split)


def _push_index(s: Subst) -> int | None:
    vary = [i for i, x in enumerate(s["xs"]) if _var(x, s["a"])]
    if len(vary) != 1 or blocks_over(s["xs"][vary[0]], s["a"]):
        return None
    return vary[0]


def _push_rhs(s: Subst, bd: Binding) -> Term:
    k = _push_index(s)
    xs = list(s["xs"])
    xs[k] = b.all_reduce(xs[k], s["a"], "sum")
    return b.einsum(xs, s["out"])


def _sample_push(draw: Draw) -> tuple[Term, Binding]:
    x, w = b.part(fresh(["B", "H"]), "tp"), fresh(["H", "F"])
    return b.all_reduce(b.einsum(sorted([x, w], key=b.skey), ("B", "F")), "tp"), draw_binding(draw)


# a contraction is linear in each operand: the sum over a moves into the one varying operand
_rule("allreduce-einsum-push",
      "ALL_REDUCE(EINSUM(xs, out), a, sum) = EINSUM(xs with x_k -> ALL_REDUCE(x_k, a, sum), out)",
      "exactly one operand x_k varies over a, and no dim of x_k is sharded over a", _AR,
      match=_sum_only(lambda t, bd: (
          {"xs": t.args[0].args, "out": t.args[0].attrs[0], "a": t.attrs[0]}
          if t.args[0].op is Op.EINSUM
          and _push_index({"xs": t.args[0].args, "a": t.attrs[0]}) is not None else None)),
      lhs=lambda s: b.all_reduce(b.einsum(s["xs"], s["out"]), s["a"], "sum"),
      rhs=_push_rhs, guard=lambda s, bd: _push_index(s) is not None, sample=_sample_push)


# ---------------------------------------------------------------------------------------------
# linear movement
def _sample_ar_move(op: Op):
    def sample(draw: Draw) -> tuple[Term, Binding]:
        bd = draw_binding(draw)
        r = draw.choice(["sum", "max"])
        x = b.part(fresh(["B", "H"]), "tp") if r == "sum" else b.shard(fresh(["B", "H", "F"]), "F", "tp")
        if r == "max":
            x = b.reduce_max(x, ["F"])
        if op is Op.RENAME:
            return b.all_reduce(b.rename(x, "H", "K"), "tp", r), bd.replace(K=bd["H"])
        if op is Op.CHUNK:
            return b.all_reduce(b.chunk(x, "H", 2, draw.int(0, 1)), "tp", r), bd
        y = b.part(fresh(["B", "H"]), "tp") if r == "sum" else b.reduce_max(
            b.shard(fresh(["B", "H", "F"]), "F", "tp"), ["F"])
        return b.all_reduce(b.concat([b.chunk(x, "H", 2, 0), b.chunk(y, "H", 2, 1)], "H"),
                            "tp", r), bd
    return sample


def _move_rule(op: Op, name: str, law: str) -> Rule:
    def match(t: Term, bd: Binding) -> Subst | None:
        x = t.args[0]
        if x.op is not op:
            return None
        s = {"xs": x.args, "attrs": x.attrs, "a": t.attrs[0], "r": t.attrs[1]}
        if op is Op.CONCAT:
            s["cshards"] = x.dim(x.attrs[0]).shards
        if op is Op.RENAME:
            s["nshards"] = x.dim(x.attrs[1]).shards
        return s

    def rebuild(xs, s: Subst) -> Term:
        if op is Op.RENAME:
            return b.rename(xs[0], *s["attrs"], s["nshards"])
        if op is Op.CHUNK:
            return b.chunk(xs[0], *s["attrs"])
        d = s["attrs"][0]
        return b.concat(xs, d, DimSpec(d, tuple(s["cshards"])))

    return _rule(name, law, "", _AR, match=match,
                 lhs=lambda s: b.all_reduce(rebuild(s["xs"], s), s["a"], s["r"]),
                 rhs=lambda s, bd: rebuild([b.all_reduce(x, s["a"], s["r"]) for x in s["xs"]], s),
                 guard=lambda s, bd: s["r"] in ("sum", "max"), sample=_sample_ar_move(op))


# sums and maxima over ranks are positionwise: they commute with renaming and block movement
_move_rule(Op.RENAME, "allreduce-rename",
           "ALL_REDUCE(RENAME(x, o, n), a, r) = RENAME(ALL_REDUCE(x, a, r), o, n)")
_move_rule(Op.CHUNK, "allreduce-chunk",
           "ALL_REDUCE(CHUNK(x, d, p, i), a, r) = CHUNK(ALL_REDUCE(x, a, r), d, p, i)")
_move_rule(Op.CONCAT, "allreduce-concat",
           "ALL_REDUCE(CONCAT(xs, d), a, r) = CONCAT(ALL_REDUCE(x, a, r) for x in xs, d)")


# ---------------------------------------------------------------------------------------------
def _max_shard_ok(s: Subst, bd: Binding) -> bool:
    return s["d"] in s["dims"] and not _var(s["x"], s["a"]) and s["d"] in s["x"].dim_names


def _match_max_shard(t: Term, bd: Binding) -> Subst | None:
    m, a, r = _ar(t)
    if r != "max" or m.op is not Op.REDUCE_MAX or m.args[0].op is not Op.SHARD:
        return None
    y = m.args[0]
    if y.attrs[1] != a:
        return None
    s = {"x": y.args[0], "d": y.attrs[0], "a": a, "dims": m.attrs[0]}
    return s if _max_shard_ok(s, bd) else None


def _sample_max_shard(draw: Draw) -> tuple[Term, Binding]:
    x = b.shard(fresh(["B", "V"]), "V", "tp")
    return b.all_reduce(b.reduce_max(x, ["V"] if draw.bool() else ["B", "V"]), "tp", "max"), \
        draw_binding(draw)


# the max over ranks of the max over each block along d is the max over d
_rule("allreduce-max-shard",
      "ALL_REDUCE(REDUCE_MAX(SHARD(x, d, a), dims), a, max) = REDUCE_MAX(x, dims)",
      "d in dims", _AR, match=_match_max_shard,
      lhs=lambda s: b.all_reduce(b.reduce_max(b.shard(s["x"], s["d"], s["a"]), s["dims"]),
                                 s["a"], "max"),
      rhs=lambda s, bd: b.reduce_max(s["x"], s["dims"]), guard=_max_shard_ok,
      sample=_sample_max_shard)


def _swap_ok(s: Subst, bd: Binding) -> bool:
    return s["r"] in ("sum", "max") and b.axis_rank(s["b"]) > b.axis_rank(s["a"])


def _match_ar_swap(t: Term, bd: Binding) -> Subst | None:
    y, bb, r = _ar(t)
    if y.op is not Op.ALL_REDUCE or y.attrs[1] != r:
        return None
    s = {"x": y.args[0], "a": y.attrs[0], "b": bb, "r": r}
    return s if _swap_ok(s, bd) else None


def _sample_ar_swap(draw: Draw) -> tuple[Term, Binding]:
    x = b.part(b.part(fresh(["B", "H"]), "dp"), "mb")
    return b.all_reduce(b.all_reduce(x, "dp"), "mb"), draw_binding(draw)


# reductions over two axes commute; the higher-ranked axis goes inside (it is the inner shard)
_rule("allreduce-swap",
      "ALL_REDUCE(ALL_REDUCE(x, a, r), b, r) = ALL_REDUCE(ALL_REDUCE(x, b, r), a, r)",
      "rank(b) > rank(a)", _AR, match=_match_ar_swap,
      lhs=lambda s: b.all_reduce(b.all_reduce(s["x"], s["a"], s["r"]), s["b"], s["r"]),
      rhs=lambda s, bd: b.all_reduce(b.all_reduce(s["x"], s["b"], s["r"]), s["a"], s["r"]),
      guard=_swap_ok, sample=_sample_ar_swap)


# ---------------------------------------------------------------------------------------------
# ALL_GATHER, REDUCE_SCATTER, BROADCAST
_AG = {Op.ALL_GATHER}


def _ag_ok(s: Subst, bd: Binding) -> bool:
    return not _var(s["x"], s["a"]) and s["d"] in s["x"].dim_names


def _match_ag(t: Term, bd: Binding) -> Subst | None:
    x = t.args[0]
    if x.op is not Op.SHARD or (x.attrs[0], x.attrs[1]) != (t.attrs[1], t.attrs[0]):
        return None
    s = {"x": x.args[0], "a": t.attrs[0], "d": t.attrs[1]}
    return s if _ag_ok(s, bd) else None


def _sample_ag(draw: Draw) -> tuple[Term, Binding]:
    d, a = draw.choice([("B", "dp"), ("H", "tp"), ("S", "cp")])
    return b.all_gather(b.shard(fresh(["B", "H", "S"]), d, a), a, d), draw_binding(draw)


# gathering the blocks of x is x
_rule("allgather-shard", "ALL_GATHER(SHARD(x, d, a), a, d) = x", "x does not vary over a", _AG,
      match=_match_ag, lhs=lambda s: b.all_gather(b.shard(s["x"], s["d"], s["a"]), s["a"], s["d"]),
      rhs=lambda s, bd: s["x"], guard=_ag_ok, sample=_sample_ag)


def _ag_comm_ok(s: Subst, bd: Binding) -> bool:
    return (s["b"] != s["a"] and s["e"] != s["d"] and not _var(s["x"], s["b"])
            and s["e"] in s["x"].dim_names)


def _match_ag_comm(t: Term, bd: Binding) -> Subst | None:
    x = t.args[0]
    if x.op is not Op.SHARD:
        return None
    s = {"x": x.args[0], "e": x.attrs[0], "b": x.attrs[1], "a": t.attrs[0], "d": t.attrs[1]}
    return s if _ag_comm_ok(s, bd) else None


def _sample_ag_comm(draw: Draw) -> tuple[Term, Binding]:
    x = b.shard(b.shard(fresh(["B", "S", "H"]), "S", "cp"), "B", "dp")
    return b.all_gather(x, "cp", "S"), draw_binding(draw)


# gathering along d over a commutes with taking a block along another dim over another axis
_rule("allgather-shard-comm",
      "ALL_GATHER(SHARD(x, e, b), a, d) = SHARD(ALL_GATHER(x, a, d), e, b)",
      "b != a and e != d", _AG, match=_match_ag_comm,
      lhs=lambda s: b.all_gather(b.shard(s["x"], s["e"], s["b"]), s["a"], s["d"]),
      rhs=lambda s, bd: b.shard(b.all_gather(s["x"], s["a"], s["d"]), s["e"], s["b"]),
      guard=_ag_comm_ok, sample=_sample_ag_comm)


def _sample_rs(draw: Draw) -> tuple[Term, Binding]:
    x = b.part(fresh(["B", "H"]), "tp")
    return b.reduce_scatter(x, "tp", draw.choice(["B", "H"])), draw_binding(draw)


# reduce-scatter is the rank's block of the all-reduce (its definition)
_rule("reduce-scatter-def", "REDUCE_SCATTER(x, a, d) = SHARD(ALL_REDUCE(x, a, sum), d, a)", "",
      {Op.REDUCE_SCATTER},
      match=lambda t, bd: {"x": t.args[0], "a": t.attrs[0], "d": t.attrs[1]},
      lhs=lambda s: b.reduce_scatter(s["x"], s["a"], s["d"]),
      rhs=lambda s, bd: b.shard(b.all_reduce(s["x"], s["a"], "sum"), s["d"], s["a"]),
      guard=always, sample=_sample_rs)


def _sample_bc(draw: Draw) -> tuple[Term, Binding]:
    x = b.shard(fresh(["B", "H"]), "H", "tp") if draw.bool() else fresh(["B"])
    return b.broadcast(x, "dp", draw.int(0, 1)), draw_binding(draw)


# broadcasting a replicated value changes nothing
_rule("broadcast-invariant", "BROADCAST(x, a, src) = x", "x does not vary over a",
      {Op.BROADCAST},
      match=lambda t, bd: ({"x": t.args[0], "a": t.attrs[0], "src": t.attrs[1]}
                           if not _var(t.args[0], t.attrs[0]) else None),
      lhs=lambda s: b.broadcast(s["x"], s["a"], s["src"]), rhs=lambda s, bd: s["x"],
      guard=lambda s, bd: not _var(s["x"], s["a"]), sample=_sample_bc)


def _sample_a2a(draw: Draw) -> tuple[Term, Binding]:
    a = draw.choice(["dp", "cp"])
    x = fresh(["B", "H", "S"])
    if draw.bool():  # a rank-varying value (each rank's own tokens), not a block of one tensor
        x = b.part(x, a)
    x = b.shard(x, "B", a) if draw.bool() else b.part(b.shard(fresh(["B", "H", "S"]), "B", a), "tp")
    return b.all_to_all(x, a, draw.choice(["H", "S"]), "B"), draw_binding(draw)


# all-to-all is the rank's block (along split) of the gathered tensor (along concat): its
# definition (torch.distributed.all_to_all; the MoE token dispatch and combine)
_rule("all-to-all-def",
      "ALL_TO_ALL(x, a, s, c) = SHARD(ALL_GATHER(x, a, c), s, a)", "",
      {Op.ALL_TO_ALL},
      match=lambda t, bd: {"x": t.args[0], "a": t.attrs[0], "s": t.attrs[1], "c": t.attrs[2]},
      lhs=lambda s: b.all_to_all(s["x"], s["a"], s["s"], s["c"]),
      rhs=lambda s, bd: b.shard(b.all_gather(s["x"], s["a"], s["c"]), s["s"], s["a"]),
      guard=always, sample=_sample_a2a)


def _ar_ag_ok(s: Subst, bd: Binding) -> bool:
    return (s["a"] != s["b"] and s["r"] in ("sum", "max") and not blocks_over(s["x"], s["a"])
            and s["d"] in s["x"].dim_names)


def _match_ar_ag(t: Term, bd: Binding) -> Subst | None:
    g, a, r = _ar(t)
    if g.op is not Op.ALL_GATHER:
        return None
    s = {"x": g.args[0], "a": a, "r": r, "b": g.attrs[0], "d": g.attrs[1]}
    return s if _ar_ag_ok(s, bd) else None


def _sample_ar_ag(draw: Draw) -> tuple[Term, Binding]:
    # a sequence-parallel position-table gradient: each (dp, mb) rank's S/tp block, gathered
    y = fresh(["B", "S", "H"])
    loc = b.einsum([b.shard(b.shard(b.shard(y, "B", "dp"), "S", "tp"), "B", "mb")], ["H", "S"])
    inner = b.all_gather(loc, "tp", "S")
    a = draw.choice(["mb", "dp"])
    return b.all_reduce(inner, a, draw.choice(["sum", "max"])), draw_binding(draw)


# reducing over one axis and gathering over another commute (blockwise sums / maxima): the
# gather goes outside, so the reduction meets the blocks it splits (GPT-2's position table
# under sequence parallelism: its gradient is gathered over tp, then summed over dp and mb)
_rule("allreduce-allgather-comm",
      "ALL_REDUCE(ALL_GATHER(x, b, d), a, r) = ALL_GATHER(ALL_REDUCE(x, a, r), b, d)",
      "a != b; no dim of x is sharded over a", _AR, match=_match_ar_ag,
      lhs=lambda s: b.all_reduce(b.all_gather(s["x"], s["b"], s["d"]), s["a"], s["r"]),
      rhs=lambda s, bd: b.all_gather(b.all_reduce(s["x"], s["a"], s["r"]), s["b"], s["d"]),
      guard=_ar_ag_ok, sample=_sample_ar_ag)
