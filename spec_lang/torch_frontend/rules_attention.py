"""Lowering rules: scaled dot-product attention and its backward, as one composite rule each.

``q: (B, H, L, E)``, ``k: (B, H, S, E)``, ``v: (B, H, S, Ev)`` (``H`` may be GQA's
``(kv_heads, n_rep)`` with ``k, v`` constant along ``n_rep``). When queries and keys index the
same named dim (self-attention), the keys' copy is renamed ``<S>_key`` so the score matrix has
two dims. With ``c = scale`` (default ``|E|^(-1/2)``), ``mask = CAUSAL_MASK(L, S_key)`` when
``is_causal`` (else 1) and ``m = stop_gradient(max_S s)``:

* ``s = c * EINSUM(q, k)``, ``e = exp(s - m) * mask``, ``P = e / sum_S e``,
  ``out = EINSUM(P, v)``, ``lse = m + log(sum_S e)``;
* backward, from ``dO`` and the forward ``out``: ``dV = EINSUM(P, dO)``, ``dP = EINSUM(dO, v)``,
  ``D = sum_Ev dO * out``, ``dS = P (dP - D)``, ``dQ = c EINSUM(dS, k)``, ``dK = c EINSUM(dS, q)``
  (the softmax Jacobian; Vaswani et al. 2017 for the forward, FlashAttention's backward, Dao et
  al. 2022, Algorithm 2, for ``D = rowsum(dO * O)``).

The CPU flash-attention kernels have no decomposition (``FRONTEND.md``); these rules are their
meaning over the reals. Dropout and an explicit ``attn_mask`` are UNKNOWN.
"""

from __future__ import annotations

import operator
from fractions import Fraction
from typing import Any

import torch.fx as fx

from spec_lang.term import DimSpec, Op, Term, term
from spec_lang.torch_frontend.lower import Lowering
from spec_lang.torch_frontend.registry import rule
from spec_lang.torch_frontend.values import TV, const, einsum, ew

__all__: list[str] = []

_FWD = "aten._scaled_dot_product_flash_attention_for_cpu.default"


def _dims_fwd(n: fx.Node, a: Any) -> tuple:
    q, k, v = (a.layouts[x] for x in n.args[:3])
    for i in (0, 1):
        a.same(q[i], k[i], n)
        a.same(k[i], v[i], n)
    a.same(q[3], k[3], n)
    a.same(k[2], v[2], n)
    return ([list(q[0]), list(q[1]), list(q[2]), list(v[3])],
            [list(q[0]), list(q[1]), list(q[2])])


class _Attn:
    """The shared pieces of forward and backward for one (q, k, v)."""

    def __init__(self, n: fx.Node, ctx: Lowering, q: TV, k: TV, v: TV, is_causal: bool,
                 scale: Any):
        if len(q.dims[2]) != 1 or len(k.dims[2]) != 1:
            raise ctx.fail(n, "attention over a sequence dim that is a product of named dims")
        self.L = q.dims[2][0]
        s = k.dims[2][0]
        self.S = s
        if s.name == self.L.name:
            sk = ctx.new_dim(s, "key")
            self.k = _rename(k.term, s.name, sk)
            self.v = _rename(v.term, s.name, sk)
            self.Sk = sk
        else:
            self.k, self.v, self.Sk = k.term, v.term, s
        if scale is None:
            e = q.dims[3]
            facs = [term(Op.DIM_SIZE, (), (d.name,), ()) for d in e]
            base = facs[0] if len(facs) == 1 else ew(Op.MUL, *facs)
            self.c = ew(Op.POW, base, attrs=(Fraction(-1, 2),))
        else:
            c = ctx.scalar(n, "scale")
            self.c = c if isinstance(c, Term) else const(c)
        self.q = q.term
        qd = [d for dim in q.dims for d in dim]
        self.BH = [d for dim in q.dims[:2] for d in dim]
        self.E = list(q.dims[3])
        self.Ev = None
        sdims = self.BH + [self.L, self.Sk]
        self.s = ew(Op.MUL, self.c, einsum([self.q, self.k], sdims))
        if is_causal:
            if self.L.shards or self.Sk.shards:
                raise ctx.fail(n, "causal attention over a sharded sequence (context "
                                  "parallelism) is not lowered")
            self.mask = term(Op.CAUSAL_MASK, (), (self.L.name, self.Sk.name),
                             (DimSpec(self.L.name), DimSpec(self.Sk.name)))
        else:
            self.mask = None
        if self.Sk.name not in self.s.dim_names:
            raise ctx.fail(n, "attention scores constant along the keys")
        keep = tuple(d for d in self.s.dims if d.name != self.Sk.name)
        mx = term(Op.REDUCE_MAX, (self.s,), ((self.Sk.name,),), keep)
        self.m = term(Op.STOP_GRAD, (mx,), (), mx.dims)
        e = ew(Op.EXP, ew(Op.ADD, self.s, ew(Op.NEG, self.m)))
        self.e = ew(Op.MUL, e, self.mask) if self.mask is not None else e
        self.den = einsum([self.e], keep)
        self.P = ew(Op.MUL, self.e, ew(Op.RECIP, self.den))
        _ = qd


def _source(x: Any) -> Any:
    """``x`` through ``detach`` / ``alias`` (autograd saves detached aliases of its inputs)."""
    while isinstance(x, fx.Node) and str(x.target) in ("aten.detach.default",
                                                       "aten.alias.default"):
        x = x.args[0]
    return x


def _rename(t: Term, old: str, new: DimSpec) -> Term:
    if old not in t.dim_names:
        return t
    return term(Op.RENAME, (t,), (old, new.name),
                tuple(new if d.name == old else d for d in t.dims))


def _check(n: fx.Node, ctx: Lowering, dropout: Any, kw: dict) -> None:
    if dropout not in (0, 0.0):
        raise ctx.fail(n, "attention dropout (its random mask is not modelled here)")
    if kw.get("attn_mask") is not None:
        raise ctx.fail(n, "attention with an explicit attn_mask")


@rule(_FWD)
class SDPA:
    """``(out, lse) = attention(q, k, v, is_causal, scale)`` (module docstring)."""

    dims = staticmethod(_dims_fwd)

    @staticmethod
    def term(n, ctx, q, k, v, dropout_p=0.0, is_causal=False, **kw):
        _check(n, ctx, dropout_p, kw)
        at = _Attn(n, ctx, q, k, v, bool(is_causal), kw.get("scale"))
        lay_o, lay_l = ctx.layout(n, 0), ctx.layout(n, 1)
        out = einsum([at.P, at.v], [d for dim in lay_o for d in dim])
        lse = ew(Op.ADD, at.m, ew(Op.LOG, at.den))
        return (TV(out, lay_o), TV(lse, lay_l))


@rule("aten._scaled_dot_product_flash_attention_for_cpu_backward.default")
class SDPABackward:
    """``(dq, dk, dv)`` of attention (module docstring); ``out`` and ``lse`` must be the
    forward's outputs for the same ``q, k, v``."""

    @staticmethod
    def dims(n, a):
        g, q, k, v = (a.layouts[x] for x in n.args[:4])
        for p, r in zip(g, a.layouts[n.args[4]]):
            a.same(p, r, n)
        return ([list(d) for d in q], [list(d) for d in k], [list(d) for d in v])

    @staticmethod
    def term(n, ctx, g, q, k, v, out, lse, dropout_p=0.0, is_causal=False, **kw):  # noqa: ARG004
        _check(n, ctx, dropout_p, kw)
        fo, fl = _source(n.args[4]), _source(n.args[5])
        ok = (isinstance(fo, fx.Node) and isinstance(fl, fx.Node)
              and fo.target is operator.getitem and fl.target is operator.getitem
              and fo.args[0] is fl.args[0] and str(fo.args[0].target) == _FWD
              and [_source(x) for x in fo.args[0].args[:3]]
              == [_source(x) for x in n.args[1:4]] and fo.args[1] == 0
              and fl.args[1] == 1 and bool(fo.args[0].args[4] if len(fo.args[0].args) > 4
                                           else fo.args[0].kwargs.get("is_causal", False))
              == bool(is_causal))
        if not ok:
            raise ctx.fail(n, "attention backward whose out / logsumexp are not the forward's "
                              "of the same q, k, v")
        at = _Attn(n, ctx, q, k, v, bool(is_causal), kw.get("scale"))
        lq, lk, lv = ctx.layout(n, 0), ctx.layout(n, 1), ctx.layout(n, 2)
        ev = list(v.dims[3])
        d_v = einsum([at.P, g.term], at.BH + [at.Sk] + ev)
        d_p = einsum([g.term, at.v], at.BH + [at.L, at.Sk])
        big_d = einsum([g.term, out.term], at.BH + [at.L])
        d_s = ew(Op.MUL, at.P, ew(Op.ADD, d_p, ew(Op.NEG, big_d)))
        d_q = ew(Op.MUL, at.c, einsum([d_s, at.k], at.BH + [at.L] + at.E))
        d_k = ew(Op.MUL, at.c, einsum([d_s, at.q], at.BH + [at.Sk] + at.E))
        if at.Sk.name != at.S.name:
            d_k = _rename(d_k, at.Sk.name, at.S)
            d_v = _rename(d_v, at.Sk.name, at.S)
        return (TV(d_q, lq), TV(d_k, lk), TV(d_v, lv))
