"""The optimizer lowerings against their references, in float64 on random shapes and values.

Each DSL optimizer (``spec_lang.optim``, ``spec_lang.muon``) is a lowering of a framework
optimizer into ops: these hypothesis tests evaluate both sides. References: ``torch.optim.AdamW``
/ ``Adam`` (state set by hand: ``step``, ``exp_avg``, ``exp_avg_sq``), and Keller Jordan's
``zeropower_via_newtonschulz5`` / ``muon_update`` re-typed here in float64 (the reference runs NS
in bf16; the coefficients, the normalisation, the transpose rule and the scale are the
published ones, KellerJordan/Muon ``muon.py``).
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from spec_lang.dims import Dim
from spec_lang.muon import NS5_COEFFICIENTS, Muon, newton_schulz
from spec_lang.optim import Adam, AdamW, InitStep, apply_step, grad_or_none, run_init, tensor_state
from tests.spec_lang.sl_helpers import inp, traced, values

torch = pytest.importorskip("torch")


@pytest.fixture(autouse=True)
def _float64_default():
    """float64 as torch's default dtype for these tests only, restored after (a module-level
    ``set_default_dtype`` leaked into every later test in the worker: CI stop 18, the trainer's
    parameter byte counts doubled)."""
    old = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    yield
    torch.set_default_dtype(old)

BETAS = [(Fraction(9, 10), Fraction(999, 1000)), (Fraction(8, 10), Fraction(95, 100))]


def _f(x):
    return float(x)


def _trace(dims, fn):
    """``fn()`` traced with ``dims`` recorded (their sizes are the evaluation's binding)."""
    from spec_lang.tensor import current_trace

    def run():
        for d in dims:
            current_trace().record_dim(d)
        return fn()
    return traced(run)


def _eval(out, ctx, inputs, names):
    vals = values([out[n].term for n in names], ctx.sizes, inputs)
    return {n: vals[out[n].term].transpose_to(("A", "C")) for n in names}


@given(a=st.integers(1, 3), c=st.integers(1, 3), t=st.integers(1, 5), betas=st.sampled_from(BETAS),
       wd=st.sampled_from([0, Fraction(1, 10)]), coupled=st.booleans(), seed=st.integers(0, 99))
def test_adam_step_matches_torch(a, c, t, betas, wd, coupled, seed):
    cls = Adam if coupled else AdamW
    opt = cls(lr=Fraction(1, 100), betas=betas, eps=Fraction(1, 10**8), weight_decay=wd, step=t)
    A, C = Dim("A", a), Dim("C", c)
    rng = np.random.default_rng(seed)
    p0, g0, m0 = (rng.standard_normal((a, c)) for _ in range(3))
    v0 = rng.uniform(0.5, 2.0, (a, c))

    def build():
        p, g = inp("p", A, C), inp("g", A, C, kind="data")
        st_ = {"exp_avg": inp("m", A, C, kind="state"),
               "exp_avg_sq": inp("v", A, C, domain="positive", kind="state")}
        return apply_step(opt, "p", p, g, st_, t - 1)
    out, ctx = _trace((A, C), build)
    got = _eval(out, ctx, {"p": p0, "g": g0, "m": m0, "v": v0},
                ["p", "exp_avg:p", "exp_avg_sq:p"])

    w = torch.nn.Parameter(torch.tensor(p0))
    tcls = torch.optim.Adam if coupled else torch.optim.AdamW
    o = tcls([w], lr=0.01, betas=tuple(map(_f, betas)), eps=1e-8, weight_decay=_f(wd))
    w.grad = torch.tensor(g0)
    o.state[w] = {"step": torch.tensor(float(t - 1)), "exp_avg": torch.tensor(m0),
                  "exp_avg_sq": torch.tensor(v0)}
    o.step()
    assert np.allclose(got["p"], w.detach().numpy(), rtol=0, atol=1e-12)
    assert np.allclose(got["exp_avg:p"], o.state[w]["exp_avg"].numpy(), rtol=0, atol=1e-12)
    assert np.allclose(got["exp_avg_sq:p"], o.state[w]["exp_avg_sq"].numpy(), rtol=0, atol=1e-12)


def _torch_adamw(p0, g0, init_steps, *, lr=0.01, wd=0.1, inert=False):
    w = torch.nn.Parameter(torch.tensor(p0))
    o = torch.optim.AdamW([w], lr=lr, betas=(0.9, 0.999), eps=1e-8, weight_decay=wd)
    for _ in range(init_steps):                    # fully_shard_optimizer's synthetic step
        if inert:
            for grp in o.param_groups:
                grp["lr"], grp["weight_decay"] = 0.0, 0.0
        w.grad = torch.zeros_like(w)
        o.step()
        if inert:
            for grp in o.param_groups:
                grp["lr"], grp["weight_decay"] = lr, wd
            o.state[w]["step"] = torch.tensor(0.0)
    p_before = w.detach().numpy().copy()
    w.grad = torch.tensor(g0)
    o.step()
    return p_before, w.detach().numpy(), int(o.state[w]["step"].item())


@given(seed=st.integers(0, 99), inert=st.booleans())
def test_fresh_adamw_and_init_step_match_torch(seed, inert):
    opt = AdamW(lr=Fraction(1, 100), betas=(Fraction(9, 10), Fraction(999, 1000)),
                eps=Fraction(1, 10**8), weight_decay=Fraction(1, 10), fresh=True)
    A, C = Dim("A", 2), Dim("C", 3)
    rng = np.random.default_rng(seed)
    p0, g0 = rng.standard_normal((2, 3)), rng.standard_normal((2, 3))
    steps = [InitStep(lr=0, weight_decay=0, reset_step=True)] if inert else [InitStep()]

    def build():
        p = inp("p", A, C)
        state = tensor_state(opt, p, {})
        p1, state, counter = run_init(opt, "p", p, state, 0, steps)
        out = apply_step(opt, "p", p1, inp("g", A, C, kind="data"), state, counter)
        out["p_before"] = p1
        return out
    out, ctx = _trace((A, C), build)
    got = _eval(out, ctx, {"p": p0, "g": g0}, ["p", "p_before"])
    before, after, step = _torch_adamw(p0, g0, 1, inert=inert)
    assert np.allclose(got["p_before"], before, rtol=0, atol=1e-12)
    assert np.allclose(got["p"], after, rtol=0, atol=1e-12)
    counter = values([out["step:p"].term], ctx.sizes, {})[out["step:p"].term]
    assert float(counter.data) == step == (1 if inert else 2)


@given(seed=st.integers(0, 99))
def test_grad_none_is_skipped_like_torch(seed):
    opt = AdamW(lr=Fraction(1, 100), weight_decay=Fraction(1, 10), step=3)
    A, C = Dim("A", 2), Dim("C", 2)
    rng = np.random.default_rng(seed)
    p0, g0, m0 = (rng.standard_normal((2, 2)) for _ in range(3))
    v0 = rng.uniform(0.5, 2.0, (2, 2))

    def build(present):
        def f():
            st_ = {"exp_avg": inp("m", A, C, kind="state"),
                   "exp_avg_sq": inp("v", A, C, domain="positive", kind="state")}
            return apply_step(opt, "p", inp("p", A, C),
                              grad_or_none(inp("g", A, C, kind="data"), present), st_, 2)
        return _trace((A, C), f)
    vals = {"p": p0, "g": g0, "m": m0, "v": v0}
    out, ctx = build(0)
    skipped = _eval(out, ctx, vals, ["p", "exp_avg:p"])
    assert np.array_equal(skipped["p"], p0) and np.array_equal(skipped["exp_avg:p"], m0)
    out, ctx = build(1)
    stepped = _eval(out, ctx, vals, ["p"])
    w = torch.nn.Parameter(torch.tensor(p0))
    o = torch.optim.AdamW([w], lr=0.01, betas=(0.9, 0.95), eps=1e-8, weight_decay=0.1)
    o.state[w] = {"step": torch.tensor(2.0), "exp_avg": torch.tensor(m0),
                  "exp_avg_sq": torch.tensor(v0)}
    w.grad = None
    o.step()                                       # PyTorch: a None gradient is skipped
    assert np.array_equal(w.detach().numpy(), p0)
    w.grad = torch.tensor(g0)
    o.step()
    assert np.allclose(stepped["p"], w.detach().numpy(), rtol=0, atol=1e-12)


# -- Muon -----------------------------------------------------------------------------------------

def _ns_reference(G: np.ndarray, steps: int) -> np.ndarray:
    """``zeropower_via_newtonschulz5`` (KellerJordan/Muon) in float64."""
    a, b, c = (float(x) for x in NS5_COEFFICIENTS)
    X = torch.tensor(G)
    if G.shape[0] > G.shape[1]:
        X = X.mT
    X = X / (X.norm() + 1e-7)
    for _ in range(steps):
        A = X @ X.mT
        B = b * A + c * A @ A
        X = a * X + B @ X
    if G.shape[0] > G.shape[1]:
        X = X.mT
    return X.numpy()


@given(rows=st.integers(1, 5), cols=st.integers(1, 5), steps=st.integers(1, 5),
       seed=st.integers(0, 99))
def test_newton_schulz_matches_the_reference(rows, cols, steps, seed):
    R, C = Dim("A", rows), Dim("C", cols)
    G = np.random.default_rng(seed).standard_normal((rows, cols))
    out, ctx = _trace((R, C), lambda: {"x": newton_schulz(inp("g", R, C), "A", "C", steps=steps)})
    got = _eval(out, ctx, {"g": G}, ["x"])["x"]
    assert np.allclose(got, _ns_reference(G, steps), rtol=0, atol=1e-9)


@given(rows=st.integers(1, 4), cols=st.integers(1, 4), seed=st.integers(0, 99),
       nesterov=st.booleans(), wd=st.sampled_from([0, Fraction(1, 10)]))
def test_muon_step_matches_the_reference(rows, cols, seed, nesterov, wd):
    # the DSL's (d_in, d_out) parameter is torch's (out, in) weight transposed
    A, C = Dim("A", cols), Dim("C", rows)            # p: (A = in, C = out)
    opt = Muon(lr=Fraction(2, 100), momentum=Fraction(95, 100), nesterov=nesterov,
               weight_decay=wd)
    rng = np.random.default_rng(seed)
    p0, g0, b0 = (rng.standard_normal((cols, rows)) for _ in range(3))

    def build():
        st_ = {"momentum_buffer": inp("b", A, C, kind="state")}
        return apply_step(opt, "p", inp("p", A, C), inp("g", A, C, kind="data"), st_, None)
    out, ctx = _trace((A, C), build)
    got = _eval(out, ctx, {"p": p0, "g": g0, "b": b0}, ["p", "momentum_buffer:p"])
    # reference, in torch layout (out, in) = transposes
    grad, buf, w = torch.tensor(g0.T), torch.tensor(b0.T), torch.tensor(p0.T)
    buf.lerp_(grad, 1 - 0.95)
    upd = grad.lerp(buf, 0.95) if nesterov else buf
    upd = torch.tensor(_ns_reference(upd.numpy(), 5)) * max(1, rows / cols) ** 0.5
    w = w * (1 - 0.02 * float(wd)) - 0.02 * upd
    assert np.allclose(got["momentum_buffer:p"], buf.numpy().T, rtol=0, atol=1e-12)
    assert np.allclose(got["p"], w.numpy().T, rtol=0, atol=1e-9)
