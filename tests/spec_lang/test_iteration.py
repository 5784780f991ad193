"""The spec's training iteration against torch: loss, gradients and optimizer step (float64)."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest
import torch

from sl_helpers import values
from spec_lang import SGD, AdamW, Dim, Spec, index, mask, ops, trace_spec
from spec_lang.errors import SpecError

B, S, H, V = Dim("B", 2), Dim("S", 3), Dim("H", 4), Dim("V", 5)


def tiny_spec(opt) -> Spec:
    def forward(p, d):
        x = ops.embedding(d["tokens"], p["emb"], V)
        h = ops.rms_norm(x, p["g"], H, Fraction(1, 10**5))
        return ops.cross_entropy(ops.einsum(h, p["head"], out=(B, S, V)), d["labels"],
                                 d["mask"], V)

    return Spec(params={"emb": (V, H), "g": (H,), "head": (H, V)},
                data={"tokens": index(B, S, range=V), "labels": index(B, S, range=V),
                      "mask": mask(B, S)},
                forward=forward, optimizer=opt)


def torch_loss(p, d):
    x = p["emb"][d["tokens"].long()]
    h = x * torch.rsqrt((x * x).mean(-1, keepdim=True) + 1e-5) * p["g"]
    lg = h @ p["head"]
    ce = torch.nn.functional.cross_entropy(lg.reshape(-1, 5), d["labels"].reshape(-1).long(),
                                           reduction="none").reshape(2, 3)
    return (d["mask"] * ce).sum() / d["mask"].sum()


def draw_inputs(rng):
    p = {"emb": rng.standard_normal((5, 4)), "g": rng.uniform(0.5, 1.5, 4),
         "head": rng.standard_normal((4, 5))}
    m = np.array([[1.0, 0.0, 1.0], [1.0, 1.0, 0.0]])
    d = {"tokens": rng.integers(0, 5, (2, 3)).astype(float),
         "labels": rng.integers(0, 5, (2, 3)).astype(float), "mask": m}
    return p, d


DIMS = {"emb": ("V", "H"), "g": ("H",), "head": ("H", "V")}


@pytest.mark.parametrize("step", [1, 3])
def test_adamw_iteration_matches_torch(step: int) -> None:
    opt = AdamW(lr=Fraction(1, 10), betas=(Fraction(9, 10), Fraction(99, 100)),
                eps=Fraction(1, 10**6), weight_decay=Fraction(1, 10), step=step)
    it = trace_spec(tiny_spec(opt))
    assert set(it.outputs) == {"loss"} | {f"{k}{n}" for n in DIMS
                                          for k in ("grad:", "", "exp_avg:", "exp_avg_sq:")}
    assert it.kinds["emb"] == "param" and it.kinds["exp_avg:emb"] == "state"
    rng = np.random.default_rng(0)
    p, d = draw_inputs(rng)
    state = {f"{s}:{k}": (rng.standard_normal(v.shape) if s == "exp_avg" else
                          rng.uniform(0.5, 2, v.shape)) for k, v in p.items()
             for s in ("exp_avg", "exp_avg_sq")}
    vals = values(list(it.outputs.values()), it.sizes, {**p, **d, **state})
    tp = {k: torch.tensor(v, requires_grad=True) for k, v in p.items()}
    td = {k: torch.tensor(v) for k, v in d.items()}
    loss = torch_loss(tp, td)
    loss.backward()
    np.testing.assert_allclose(vals[it.outputs["loss"]].data, loss.item(), rtol=1e-12)
    for k in p:
        np.testing.assert_allclose(vals[it.outputs[f"grad:{k}"]].transpose_to(DIMS[k]),
                                   tp[k].grad.numpy(), rtol=1e-9, atol=1e-12)
    o = torch.optim.AdamW(list(tp.values()), lr=0.1, betas=(0.9, 0.99), eps=1e-6,
                          weight_decay=0.1, foreach=False)
    for k, t in tp.items():
        o.state[t] = {"step": torch.tensor(float(step - 1)),
                      "exp_avg": torch.tensor(state[f"exp_avg:{k}"]),
                      "exp_avg_sq": torch.tensor(state[f"exp_avg_sq:{k}"])}
    o.step()
    for k, t in tp.items():
        for name, ref in ((k, t), (f"exp_avg:{k}", o.state[t]["exp_avg"]),
                          (f"exp_avg_sq:{k}", o.state[t]["exp_avg_sq"])):
            np.testing.assert_allclose(vals[it.outputs[name]].transpose_to(DIMS[k]),
                                       ref.detach().numpy(), rtol=1e-9, atol=1e-12,
                                       err_msg=name)


def test_sgd_iteration_matches_torch() -> None:
    it = trace_spec(tiny_spec(SGD(lr=Fraction(1, 2), weight_decay=Fraction(1, 100))))
    assert set(it.outputs) == {"loss"} | {f"{k}{n}" for n in DIMS for k in ("grad:", "")}
    rng = np.random.default_rng(1)
    p, d = draw_inputs(rng)
    vals = values(list(it.outputs.values()), it.sizes, {**p, **d})
    tp = {k: torch.tensor(v, requires_grad=True) for k, v in p.items()}
    torch_loss(tp, {k: torch.tensor(v) for k, v in d.items()}).backward()
    torch.optim.SGD(list(tp.values()), lr=0.5, weight_decay=0.01).step()
    for k, t in tp.items():
        np.testing.assert_allclose(vals[it.outputs[k]].transpose_to(DIMS[k]),
                                   t.detach().numpy(), rtol=1e-10)


def test_hyper_parameters_are_exact() -> None:
    it = trace_spec(tiny_spec(AdamW(lr=3e-4, step=2)))
    from spec_lang.term import Op, walk  # noqa: PLC0415

    consts = {n.attrs[0] for n in walk(list(it.outputs.values())) if n.op is Op.CONST}
    assert all(not isinstance(c, float) for c in consts)
    b1 = Fraction(9, 10)
    assert -Fraction(3, 10000) / (1 - b1**2) in consts  # -lr / (1 - beta1^t), exactly
    with pytest.raises(SpecError, match="lr 0.30000000000000004 is a float"):
        trace_spec(tiny_spec(SGD(lr=0.1 + 0.2)))


def test_spec_validation() -> None:
    with pytest.raises(SpecError, match="both parameters and data"):
        Spec(params={"x": (B,)}, data={"x": mask(B)}, forward=lambda p, d: None, optimizer=SGD())
    with pytest.raises(SpecError, match="repeats a dim"):
        Spec(params={"w": (B, B)}, data={}, forward=lambda p, d: None, optimizer=SGD())
    with pytest.raises(SpecError, match="index input needs range"):
        index(B, S, range=None)
    sp = Spec(params={"w": (B, H)}, data={}, optimizer=SGD(),
              forward=lambda p, d: p["w"] * 2)
    with pytest.raises(SpecError, match=r"test_iteration\.py:\d+: the spec's forward returned "
                                        r"\(B, H\), the loss must be a scalar"):
        trace_spec(sp)
    sp = Spec(params={"w": (B, H)}, data={}, optimizer=SGD(), forward=lambda p, d: p["v"])
    with pytest.raises(SpecError, match=r"no parameter 'v'; parameters here: \['w'\]"):
        trace_spec(sp)
