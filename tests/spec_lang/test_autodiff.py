"""Reverse-mode autodiff against torch.autograd in float64, one op (or composite) per case.

Each case builds ``out = f(inputs)`` in the DSL and in torch; the loss is
``sum(out * out) / 2 + sum(out)`` (order-free in dims) and every input's gradient must match.
"""

from __future__ import annotations

import math
import sys
from fractions import Fraction

import numpy as np
import pytest
import torch

from sl_helpers import as_array, draw, inp, traced, values
from spec_lang import ops
from spec_lang.autodiff import grad, lower
from spec_lang.dims import Dim
from spec_lang.errors import SpecError
from spec_lang.term import Op

B, S, T, H, F, V = Dim("B", 3), Dim("S", 4), Dim("T", 4), Dim("H", 6), Dim("F", 5), Dim("V", 7)
HD = Dim("HD", 4)
HDh = HD.half()
SIZES = {d.name: d.size for d in (B, S, T, H, F, V, HD, HDh)}

# name -> (dims, domain)
INPUTS = {
    "x": ((B, H), "real"), "y": ((H,), "real"), "p": ((B, H), "positive"), "w": ((H, F), "real"),
    "m": ((B, H), "mask"), "q": ((S, HD), "real"), "sc": ((S, T), "real"),
    "tok": ((B, S), "index"), "tab": ((V, H), "real"), "lg": ((B, S, V), "real"),
    "bias": ((H,), "real"), "tm": ((B, S), "mask"),
}


def _rope_torch(q: torch.Tensor, theta: float) -> torch.Tensor:
    half = q.shape[-1] // 2
    pos = torch.arange(q.shape[0], dtype=torch.float64)
    fr = theta ** (-torch.arange(half, dtype=torch.float64) / half)
    ang = pos[:, None] * fr[None, :]
    c, s = torch.cos(ang), torch.sin(ang)
    q1, q2 = q[:, :half], q[:, half:]
    return torch.cat([q1 * c - q2 * s, q2 * c + q1 * s], dim=-1)


def _ce_torch(lg: torch.Tensor, lab: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    ce = torch.nn.functional.cross_entropy(lg.reshape(-1, lg.shape[-1]), lab.reshape(-1).long(),
                                           reduction="none").reshape(lab.shape)
    return (mask * ce).sum() / mask.sum()


CASES = {
    "add": (lambda a: a["x"] + a["y"], lambda a: a["x"] + a["y"]),
    "sub": (lambda a: a["x"] - a["y"], lambda a: a["x"] - a["y"]),
    "mul": (lambda a: a["x"] * a["y"], lambda a: a["x"] * a["y"]),
    "div": (lambda a: a["x"] / a["p"], lambda a: a["x"] / a["p"]),
    "div_const": (lambda a: a["x"] / 3, lambda a: a["x"] / 3),
    "neg": (lambda a: -a["x"], lambda a: -a["x"]),
    "recip": (lambda a: ops.recip(a["p"]), lambda a: 1 / a["p"]),
    "pow2": (lambda a: a["x"] ** 2, lambda a: a["x"] ** 2),
    "pow3": (lambda a: a["x"] ** 3, lambda a: a["x"] ** 3),
    "pow_half": (lambda a: a["p"] ** Fraction(1, 2), lambda a: a["p"] ** 0.5),
    "pow_neg": (lambda a: a["p"] ** -2, lambda a: a["p"] ** -2),
    "exp": (lambda a: ops.exp(a["x"]), lambda a: torch.exp(a["x"])),
    "log": (lambda a: ops.log(a["p"]), lambda a: torch.log(a["p"])),
    "sqrt": (lambda a: ops.sqrt(a["p"]), lambda a: torch.sqrt(a["p"])),
    "rsqrt": (lambda a: ops.rsqrt(a["p"]), lambda a: torch.rsqrt(a["p"])),
    "sigmoid": (lambda a: ops.sigmoid(a["x"]), lambda a: torch.sigmoid(a["x"])),
    "silu": (lambda a: ops.silu(a["x"]), lambda a: torch.nn.functional.silu(a["x"])),
    "tanh": (lambda a: ops.tanh(a["x"]), lambda a: torch.tanh(a["x"])),
    "erf": (lambda a: ops.erf(a["x"]), lambda a: torch.erf(a["x"])),
    "gelu": (lambda a: ops.gelu(a["x"]), lambda a: torch.nn.functional.gelu(a["x"])),
    "gelu_tanh": (lambda a: ops.gelu(a["x"], approximate="tanh"),
                  lambda a: torch.nn.functional.gelu(a["x"], approximate="tanh")),
    "where": (lambda a: ops.where(a["m"], a["x"], a["p"]),
              lambda a: torch.where(a["m"] != 0, a["x"], a["p"])),
    "cast": (lambda a: ops.cast(a["x"], "bf16") * a["x"], lambda a: a["x"] * a["x"]),
    "stop_gradient": (lambda a: a["x"] * ops.stop_gradient(a["x"]),
                      lambda a: a["x"] * a["x"].detach()),
    "einsum_matmul": (lambda a: ops.einsum(a["x"], a["w"], out=(B, F)), lambda a: a["x"] @ a["w"]),
    "einsum_three": (lambda a: ops.einsum(a["x"], a["w"], a["y"], out=(F,), sum_single=(B,)),
                     lambda a: torch.einsum("bh,hf,h->f", a["x"], a["w"], a["y"])),
    "einsum_square": (lambda a: ops.einsum(a["x"], a["x"], out=(B,)),
                      lambda a: (a["x"] * a["x"]).sum(-1)),
    "sum": (lambda a: ops.sum(a["x"], H), lambda a: a["x"].sum(-1)),
    "sum_all": (lambda a: ops.sum(a["x"] * a["x"]), lambda a: (a["x"] * a["x"]).sum()),
    "mean": (lambda a: ops.mean(a["x"], H), lambda a: a["x"].mean(-1)),
    "broadcast": (lambda a: ops.sum(a["x"], H) * a["y"],
                  lambda a: a["x"].sum(-1)[:, None] * a["y"][None, :]),
    "softmax": (lambda a: ops.softmax(a["x"], H), lambda a: torch.softmax(a["x"], -1)),
    "softmax_causal": (lambda a: ops.softmax(a["sc"], T, mask=ops.causal_mask(S, T)),
                       lambda a: torch.softmax(a["sc"].masked_fill(
                           torch.triu(torch.ones(4, 4, dtype=torch.bool), 1), -math.inf), -1)),
    "log_softmax": (lambda a: ops.log_softmax(a["x"], H), lambda a: torch.log_softmax(a["x"], -1)),
    "logsumexp": (lambda a: ops.logsumexp(a["x"], H), lambda a: torch.logsumexp(a["x"], -1)),
    "max_stopped": (lambda a: a["x"] - ops.stop_gradient(ops.max(a["x"], H)),
                    lambda a: a["x"] - a["x"].max(-1, keepdim=True).values.detach()),
    "rms_norm": (lambda a: ops.rms_norm(a["x"], a["y"], H, Fraction(1, 10**5)),
                 lambda a: a["x"] * torch.rsqrt((a["x"] ** 2).mean(-1, keepdim=True) + 1e-5)
                 * a["y"]),
    "layer_norm": (lambda a: ops.layer_norm(a["x"], a["y"], a["bias"], H, Fraction(1, 10**5)),
                   lambda a: torch.nn.functional.layer_norm(a["x"], (6,), a["y"], a["bias"],
                                                            1e-5)),
    "rope": (lambda a: ops.rope(a["q"], S, HD, HDh, 10000), lambda a: _rope_torch(a["q"], 10000.0)),
    "chunk_concat_swap": (
        lambda a: ops.concat([ops.rename(ops.rename(ops.chunk(a["q"], HD, 2, 1), HD, HDh), HDh, HD,
                                         block=(0, 2)),
                              ops.rename(ops.rename(ops.chunk(a["q"], HD, 2, 0), HD, HDh), HDh, HD,
                                         block=(1, 2))], HD) * a["q"],
        lambda a: torch.cat([a["q"][:, 2:], a["q"][:, :2]], -1) * a["q"]),
    "rename": (lambda a: ops.einsum(a["q"], ops.rename(a["q"], S, T), out=(S, T)),
               lambda a: a["q"] @ a["q"].T),
    "embedding": (lambda a: ops.embedding(a["tok"], a["tab"], V),
                  lambda a: a["tab"][a["tok"].long()]),
    "cross_entropy": (lambda a: ops.cross_entropy(a["lg"], a["tok"], a["tm"], V),
                      lambda a: _ce_torch(a["lg"], a["tok"], a["tm"])),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_gradient_matches_torch(case: str) -> None:
    dsl, ref = CASES[case]

    def build():
        args = {k: inp(k, *dims, domain=dom, rng_dim=V if dom == "index" else None)
                for k, (dims, dom) in INPUTS.items()}
        out = dsl(args)
        loss = ops.sum(out * out) / 2 + ops.sum(out)
        return args, out, loss

    (args, out, loss), ctx = traced(build)
    used = [k for k in args if any(t is args[k].term for t in _leaves(loss.term))]
    diff = [k for k in used if INPUTS[k][1] not in ("index", "mask")]
    grads = grad(loss.term, [args[k].term for k in diff])
    rng = np.random.default_rng(7)
    vals_np = {k: draw(tuple(d.size for d in INPUTS[k][0]), INPUTS[k][1], rng, hi=V.size)
               for k in INPUTS}
    vals = values([loss.term, *grads], {**SIZES, **ctx.sizes}, vals_np)
    tt = {k: torch.tensor(v, dtype=torch.float64, requires_grad=k in diff)
          for k, v in vals_np.items()}
    o = ref(tt)
    tl = (o * o).sum() / 2 + o.sum()
    tl.backward()
    np.testing.assert_allclose(vals[loss.term].data, tl.item(), rtol=1e-10)
    assert diff, "the case differentiates nothing"
    for k, g in zip(diff, grads):
        got = as_array(vals[g], tuple(d.name for d in INPUTS[k][0]))
        np.testing.assert_allclose(np.broadcast_to(got, tt[k].shape), tt[k].grad.numpy(),
                                   rtol=1e-9, atol=1e-11, err_msg=f"d loss / d {k}")


def _leaves(t):
    from spec_lang.term import walk  # noqa: PLC0415

    return [n for n in walk(t) if n.op is Op.INPUT]


def test_gradient_construction_is_deterministic_and_shared() -> None:
    def build():
        x, w = inp("x", B, H), inp("w", H, F)
        loss = ops.sum(ops.silu(ops.einsum(x, w, out=(B, F))))
        return x, w, loss

    (x, w, loss), _ = traced(build)
    g1 = grad(loss.term, [x.term, w.term])
    g2 = grad(loss.term, [x.term, w.term])
    assert all(a is b for a, b in zip(g1, g2))  # hash-consed: same construction, same node


def test_unused_parameter_gets_a_typed_zero() -> None:
    (x, w, loss), _ = traced(lambda: (inp("x", B, H), inp("w", H, F),
                                      ops.sum(inp("x", B, H) * 2)))
    gx, gw = grad(loss.term, [x.term, w.term])
    assert gw.op is Op.MUL and gw.dims == w.term.dims
    v = values([gx, gw], SIZES, {"x": np.ones((3, 6)), "w": np.ones((6, 5))})
    assert np.all(v[gw].data == 0)
    np.testing.assert_array_equal(as_array(v[gx], ("B", "H")), np.full((3, 6), 2.0))


def test_max_on_a_differentiated_path_is_an_error_naming_the_line() -> None:
    def build():
        x = inp("x", B, H)
        return x, ops.sum(ops.max(x, H))

    (x, loss), _ = traced(build)
    with pytest.raises(SpecError, match=r"test_autodiff\.py:\d+: REDUCE_MAX .*stop_gradient"):
        grad(loss.term, [x.term])


def test_loss_must_be_scalar() -> None:
    (x, out), _ = traced(lambda: (inp("x", B, H), inp("x", B, H) * 2))
    with pytest.raises(SpecError, match="must be a scalar"):
        grad(out.term, [x.term])


def test_deep_chain_needs_no_recursion() -> None:
    """5,000 chained ops differentiate and lower under a recursion limit of 200."""
    def build():
        x = inp("x", B, H)
        y = x
        for i in range(5000):
            y = ops.tanh(y) * Fraction(1, 2) + x if i % 2 else ops.sigmoid(y)
        return x, ops.sum(y)

    (x, loss), _ = traced(build)
    old = sys.getrecursionlimit()
    sys.setrecursionlimit(200)
    try:
        (g,) = grad(loss.term, [x.term])
        lower([g])
    finally:
        sys.setrecursionlimit(old)
    assert g.dims == x.term.dims




def _raw_gelu(x):
    """The forward-only GELU op (a front end may build it; ops.gelu is written in ERF)."""
    from spec_lang.tensor import Tensor
    from spec_lang.term import term

    return Tensor(term(Op.GELU, (x.term,), (), x.term.dims))


@pytest.mark.parametrize("op", ["gelu", "maximum"])
def test_forward_only_ops_on_a_differentiated_path_are_errors(op: str) -> None:
    def build():
        x = inp("x", B, H)
        y = _raw_gelu(x) if op == "gelu" else ops.maximum(x, ops.const(0))
        return x, ops.sum(y)

    (x, loss), _ = traced(build)
    with pytest.raises(SpecError, match=r"test_autodiff\.py:\d+: (GELU|MAXIMUM) is on a "
                                        "differentiated path"):
        grad(loss.term, [x.term])
    (x2, loss2), _ = traced(lambda: (inp("x", B, H),
                                     ops.sum(inp("x", B, H) * ops.stop_gradient(_raw_gelu(
                                         inp("x", B, H))))))
    assert grad(loss2.term, [x2.term])[0].dims == x2.term.dims
