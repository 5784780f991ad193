"""Model pieces against hand-written references: RMSNorm, RoPE, GQA causal attention, SwiGLU."""

from __future__ import annotations

import math

import pytest
import torch

from trainer.api import TrainerConfig
from trainer.model import Attention, Llama, RMSNorm, SwiGLU, apply_rope, init_transformer_stage, rope_tables
from trainer.model import TransformerStage


def _gen(seed: int = 0) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def test_rmsnorm_by_hand():
    norm = RMSNorm(2)
    with torch.no_grad():
        norm.weight.copy_(torch.tensor([1.0, 2.0]))
    x = torch.tensor([[3.0, 4.0]])
    rms = math.sqrt((9 + 16) / 2 + 1e-5)
    torch.testing.assert_close(norm(x), torch.tensor([[3.0 / rms, 8.0 / rms]]))


def test_rope_rotates_pairs_by_position_times_frequency():
    d, t = 4, 5
    cos, sin = rope_tables(t, d)
    x = torch.randn(1, 1, t, d, generator=_gen())
    y = apply_rope(x, cos, sin)
    for pos in range(t):
        for j in range(d // 2):
            angle = pos * 10000.0 ** (-2 * j / d)
            a, b = x[0, 0, pos, j].item(), x[0, 0, pos, j + d // 2].item()
            assert y[0, 0, pos, j].item() == pytest.approx(a * math.cos(angle) - b * math.sin(angle), abs=1e-5)
            assert y[0, 0, pos, j + d // 2].item() == pytest.approx(b * math.cos(angle) + a * math.sin(angle), abs=1e-5)


def test_rope_scores_depend_only_on_relative_position():
    d = 8
    cos, sin = rope_tables(16, d)
    q, k = torch.randn(d, generator=_gen(1)), torch.randn(d, generator=_gen(2))
    seq_q = q.expand(1, 1, 16, d)
    seq_k = k.expand(1, 1, 16, d)
    rq, rk = apply_rope(seq_q, cos, sin)[0, 0], apply_rope(seq_k, cos, sin)[0, 0]  # (T, D)
    assert (rq[7] @ rk[4]).item() == pytest.approx((rq[10] @ rk[7]).item(), abs=1e-5)
    assert (rq[3] @ rk[3]).item() == pytest.approx((q @ k).item(), abs=1e-5)


def test_gqa_causal_attention_matches_explicit_softmax():
    cfg = TrainerConfig(d_model=16, n_heads=4, n_kv_heads=2, context=6)
    attn = Attention(cfg)
    g = _gen(3)
    for p in attn.parameters():
        torch.nn.init.normal_(p, 0, 0.3, generator=g)
    cos, sin = rope_tables(6, 4)
    x = torch.randn(2, 6, 16, generator=g)
    out = attn(x, cos, sin)
    q = apply_rope((x @ attn.wq.T).view(2, 6, 4, 4).transpose(1, 2), cos, sin)  # (B, H, T, D)
    k = apply_rope((x @ attn.wk.T).view(2, 6, 2, 4).transpose(1, 2), cos, sin)  # (B, K, T, D)
    v = (x @ attn.wv.T).view(2, 6, 2, 4).transpose(1, 2)
    k, v = k.repeat_interleave(2, dim=1), v.repeat_interleave(2, dim=1)  # query head h uses kv head h // 2
    scores = q @ k.transpose(-1, -2) / 2.0  # sqrt(D) = 2
    scores = scores.masked_fill(torch.triu(torch.ones(6, 6, dtype=torch.bool), 1), float("-inf"))
    ref = (scores.softmax(-1) @ v).transpose(1, 2).reshape(2, 6, 16) @ attn.wo.T
    torch.testing.assert_close(out, ref, rtol=1e-5, atol=1e-6)


def test_swiglu_by_hand():
    cfg = TrainerConfig(d_model=2, n_heads=1, n_kv_heads=1, ffn_hidden=3)
    mlp = SwiGLU(cfg)
    g = _gen(4)
    for p in mlp.parameters():
        torch.nn.init.normal_(p, 0, 1.0, generator=g)
    x = torch.randn(5, 2, generator=g)
    h = x @ mlp.w1.T
    ref = ((h * torch.sigmoid(h)) * (x @ mlp.w3.T)) @ mlp.w2.T
    torch.testing.assert_close(mlp(x), ref)


def test_model_is_causal(make_trainer):
    t = make_trainer()
    model = Llama(t.config)
    model.load_stages(list(t.stages))
    idx = torch.randint(0, 300, (1, 16), generator=_gen(5))
    changed = idx.clone()
    changed[0, 9] = (idx[0, 9] + 1) % 300
    a, b = model(idx), model(changed)
    torch.testing.assert_close(a[:, :9], b[:, :9], rtol=0, atol=0)
    assert (a[:, 9:] - b[:, 9:]).abs().max() > 1e-6


def test_transformer_stages_share_parameter_names_and_init_is_seeded():
    cfg = TrainerConfig(n_stages=3, layers_per_stage=2)
    a, b = TransformerStage(cfg), TransformerStage(cfg)
    init_transformer_stage(a, cfg, _gen(7))
    init_transformer_stage(b, cfg, _gen(7))
    assert list(a.state_dict()) == list(b.state_dict())
    assert "rope_cos" not in a.state_dict()  # RoPE tables are not weights
    for k in a.state_dict():
        assert torch.equal(a.state_dict()[k], b.state_dict()[k])
    std = a.blocks[0].attn.wo.std().item()
    assert abs(std - 0.02 / math.sqrt(2 * 3 * 2)) < 0.002  # GPT-2 residual scaling 1/sqrt(2 * n_layers)
