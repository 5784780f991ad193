"""DeepSeek-V3 as a spec: MLA, 3 dense + 58 MoE layers, group-limited sigmoid routing, MTP.

Sources: the DeepSeek-V3 technical report (arXiv 2412.19437), sec. 2.1 (MLA, eqs. 1-11;
DeepSeekMoE with auxiliary-loss-free balancing, eqs. 12-16; the sequence-wise balance loss,
eqs. 17-20) and sec. 2.2 (multi-token prediction, eqs. 21-25); the official ``inference/model.py``
of ``deepseek-ai/DeepSeek-V3`` (classes ``MLA``, ``Gate``, ``MoE``, ``MLP``, ``Block``) for the
exact semantics; the published ``config.json`` / ``docs/ANCHORS.md`` ("Real model configurations")
for the sizes of :data:`DEEPSEEK_V3`.

**Named dims** (no reshapes; the official flat projections are stored with their output split
by name, which is the same set of parameters)::

    B S T   batch, query positions, key positions (S renamed)      H    hidden (7168)
    NH      attention heads (128)                                   QR   q LoRA rank (1536)
    KVR     kv LoRA rank (512)                                      DN   qk nope head dim (128)
    DR      qk rope head dim (64), DR_half = DR / 2                DV   v head dim (128)
    F       dense FFN (18432)      FE  expert FFN (2048)           FS   shared FFN (n_shared * FE)
    E       routed experts (256)   EG  experts per group (E / n_groups = 32)     V  vocab (129280)

**MLA** (report eqs. 1-11; ``MLA.forward`` with ``attn_impl="naive"``), per layer::

    attn.wq_a (H, QR)   attn.q_norm (QR,)   attn.wq_b.nope (QR, NH, DN)
    attn.wq_b.rope (QR, NH, DR)
    attn.wkv_a.kv (H, KVR)   attn.wkv_a.rope (H, DR)   attn.kv_norm (KVR,)
    attn.wkv_b.k (KVR, NH, DN)   attn.wkv_b.v (KVR, NH, DV)   attn.wo (NH, DV, H)

``q = q_norm(x wq_a) wq_b`` split into ``q_nope (B,S,NH,DN)`` and ``q_rope = rope(.) (B,S,NH,DR)``;
the compressed kv latent ``c = kv_norm(x wkv_a.kv) (B,S,KVR)``; the decoupled key
``k_rope = rope(x wkv_a.rope) (B,S,DR)``, **one per position, shared by all heads**;
``k_nope = c wkv_b.k``, ``v = c wkv_b.v``; ``scores = (q_nope.k_nope + q_rope.k_rope) /
sqrt(DN + DR)`` ``(B,NH,S,T)``; causal softmax over ``T``; ``out = (probs v) wo``. The official
``wq_b`` (``QR -> NH x (DN + DR)``), ``wkv_a`` (``H -> KVR + DR``) and ``wkv_b``
(``KVR -> NH x (DN + DV)``) are these weights side by side. RoPE is written in the rotate-half
form (:func:`spec_lang.ops.rope`); the official code rotates interleaved pairs
(``view_as_complex``), which equals rotate-half after a fixed permutation of the ``DR`` output
columns of ``wq_b.rope`` and ``wkv_a.rope`` (a relabelling of parameters: Hugging Face's
conversion does exactly this; ``tests/spec_lang/test_deepseek.py`` checks it numerically).
**YaRN** (the context-extension stage, sec. 4.3: RoPE frequency interpolation and the softmax
``mscale``) is a change made after pre-training and is **not modelled**: RoPE is the plain
``theta = 10000`` one of pre-training at sequence length 4096.

**Layers.** ``n_dense_layers`` (3) leading blocks with a dense SwiGLU FFN ``mlp.w1, mlp.w3 (H, F)``,
``mlp.w2 (F, H)``; the others are MoE blocks (:mod:`spec_lang.models.moe` names):
``moe.router (H, E)``, ``moe.experts.w1/w3 (E, H, FE)``, ``moe.experts.w2 (E, FE, H)``,
``moe.shared.w1/w3 (H, FS)``, ``moe.shared.w2 (FS, H)``. Every block is pre-norm
(``attention_norm``, ``ffn_norm``, RMSNorm eps 1e-6) and marks its input / output as layer
boundaries ``layers.{i}`` / ``layers.{i}.out`` (:func:`spec_lang.ops.layer_boundary`).

**Routing** (report eqs. 12-16; ``Gate.forward``): ``s = sigmoid(x router)``; selection on
``s + b`` with ``b = e_score_correction_bias (E,)`` (data: the auxiliary-loss-free balancing
bias, used **for selection only**); group-limited: the ``E`` experts form ``n_groups`` contiguous
groups, a group's score is the sum of its top-2 ``s + b``, the ``topk_groups`` best groups are
eligible, and the top-``k`` experts are chosen among the eligible ones; gate weights = the
selected ``s`` normalised over the selected experts, times ``routed_scaling`` (2.5). The exact
construction (no large constants, no ``-inf``) is :func:`spec_lang.models.moe.router` with
``n_groups > 1``. The bias *update* (``b_i += gamma sign(...)`` between steps, sec. 2.1.2) is
not a gradient step and is not modelled: ``b`` is an input of the iteration.

**Sequence-wise balance loss** (eqs. 17-20): per sequence ``b``,
``L_b = sum_e f_{b,e} P_{b,e}`` with ``f_{b,e} = E / (k |S|) sum_s 1[s_{b,s,e} in TopK(s_{b,s})]``
(no gradient; eq. 18 counts the top-k of the affinities ``s`` themselves, not the biased,
group-limited selection: Megatron-LM's ``compute_routing_scores_for_aux_loss`` does the same) and
``P_{b,e} = (1/|S|) sum_s s'[b,s,e]``, ``s' = s / sum_E s``; the objective adds
``alpha * mean_B(L_b)`` per MoE layer (``alpha = 1e-4``, sec. 4.2). ``ctx.seq_routing_count``
carries the per-sequence counts (an all-reduce over ``cp`` when a plan splits sequences).

**MTP** (sec. 2.2, depth ``D = 1``): ``h' = [RMSNorm_h(h); RMSNorm_e(Emb(t_{i+1}))] W_proj``
(``mtp.0.hnorm``, ``mtp.0.enorm (H,)``, ``mtp.0.eh_proj`` split by name as
``mtp.0.eh_proj.h, mtp.0.eh_proj.e (H, H_out)``), one MoE block (``mtp.0.*``, boundaries
``mtp.0`` / ``mtp.0.out``), the module's own final RMSNorm ``mtp.0.norm`` (the released
checkpoint's ``shared_head.norm``), and the **shared** embedding and output head; its
cross-entropy is on ``t_{i+2}``. In the DSL: ``t_{i+1}`` at position ``i`` is ``labels[i]``
(labels are the next tokens), the target ``t_{i+2}`` is ``shift(labels, S)[i]`` and the weight
``shift(mask, S)`` (the last position gets weight 0; :func:`spec_lang.cp.shift`, through the
hook ``ctx.next_position``). ``h`` is the main model's final hidden state, after its final
RMSNorm (the paper says "the representation given by the main model"; Megatron-LM's
``MultiTokenPredictionLayer``, the public training implementation, receives the decoder's
output after its final layernorm and applies ``hnorm`` to it). Objective:
``L = L_main + lambda L_mtp + alpha sum_{MoE layers, MTP's included} L_bal`` with
``lambda = 3/10`` (sec. 4.2, first 10T tokens).

**Hooks** (:class:`DeepSeekContext`, identity in the spec): Llama's ``enter_tp`` / ``exit_tp``
(around MLA and the dense and shared MLPs), ``embed``, ``head_input``, ``loss``; the MoE hooks
``dispatch`` / ``combine`` (EP all-to-all), ``routing_count``; and ``seq_routing_count``,
``next_position`` (the MTP's shifted targets). Hooks
receive :class:`DeepSeekDims` (it has ``B, S, T, H, V`` and the MoE dims; ``d.llama`` is ``d``
itself and ``d.moe`` the :class:`~spec_lang.models.moe.MoEDims` view).

Not modelled: YaRN; the bias update; FP8 mixed precision (a numeric format, the spec is over the
reals); token dropping / capacity (DeepSeek-V3 drops no tokens); MTP depth > 1 is supported by
``mtp_depth`` but only depth 1 is the published configuration.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from spec_lang import ops
from spec_lang.cp import shift
from spec_lang.dims import Dim
from spec_lang.errors import SpecError
from spec_lang.models.moe import MoEConfig, MoEContext, MoEDims, router, swiglu
from spec_lang.spec import Data, Params, index, mask, real
from spec_lang.tensor import Tensor

__all__ = ["DeepSeekConfig", "DEEPSEEK_V3", "DEEPSEEK_DEBUG", "DeepSeekDims", "DeepSeekContext",
           "DeepSeekModel", "deepseek", "mla", "dense_mlp", "deepseek_moe", "sequence_aux_loss",
           "dense_block", "moe_block", "mtp_module", "deepseek_head", "deepseek_forward",
           "param_count",
           "activated_param_count"]


@dataclass(frozen=True, kw_only=True, slots=True)
class DeepSeekConfig:
    """Sizes and constants of a DeepSeek-V3-style model (exact constants).

    Attributes (official ``ModelArgs`` / ``config.json`` names in brackets):
        hidden [dim], n_layers, n_dense_layers [n_dense_layers / first_k_dense_replace],
        n_heads, q_lora_rank, kv_lora_rank, qk_nope_head_dim, qk_rope_head_dim, v_head_dim,
        dense_ffn_hidden [inter_dim], moe_ffn_hidden [moe_inter_dim], n_routed_experts,
        n_shared_experts, top_k [n_activated_experts], n_groups [n_expert_groups],
        topk_groups [n_limited_groups], routed_scaling [route_scale], vocab, norm_eps,
        rope_theta, aux_loss_alpha (sequence-wise balance loss; 0: none), mtp_depth
        [num_nextn_predict_layers; 0: no MTP], mtp_lambda, batch, seq.
    """

    name: str
    hidden: int
    n_layers: int
    n_dense_layers: int
    n_heads: int
    q_lora_rank: int
    kv_lora_rank: int
    qk_nope_head_dim: int
    qk_rope_head_dim: int
    v_head_dim: int
    dense_ffn_hidden: int
    moe_ffn_hidden: int
    n_routed_experts: int
    n_shared_experts: int = 1
    top_k: int = 8
    n_groups: int = 1
    topk_groups: int = 1
    routed_scaling: Any = Fraction(5, 2)
    vocab: int = 129280
    norm_eps: Any = Fraction(1, 10**6)
    rope_theta: Any = 10000
    aux_loss_alpha: Any = Fraction(1, 10**4)
    mtp_depth: int = 1
    mtp_lambda: Any = Fraction(3, 10)
    batch: int = 1
    seq: int = 4096

    def moe(self) -> MoEConfig:
        """The :class:`~spec_lang.models.moe.MoEConfig` view the router uses (sigmoid gating,
        selection bias, normalised top-k, routed scaling, groups)."""
        return MoEConfig(name=self.name, hidden=self.hidden, n_layers=self.n_layers,
                         n_heads=self.n_heads, n_kv_heads=self.n_heads,
                         moe_ffn_hidden=self.moe_ffn_hidden,
                         n_routed_experts=self.n_routed_experts,
                         n_shared_experts=self.n_shared_experts, top_k=self.top_k,
                         gating="sigmoid", norm_topk_prob=True,
                         routed_scaling=self.routed_scaling, balance_bias=True,
                         aux_loss_alpha=self.aux_loss_alpha, n_groups=self.n_groups,
                         topk_groups=self.topk_groups, vocab=self.vocab,
                         rope_theta=self.rope_theta, norm_eps=self.norm_eps, batch=self.batch,
                         seq=self.seq)

    def is_moe_layer(self, i: int) -> bool:
        """Layer ``i`` (0-based) is an MoE layer (the first ``n_dense_layers`` are dense)."""
        return i >= self.n_dense_layers


DEEPSEEK_V3 = DeepSeekConfig(
    name="deepseek_v3", hidden=7168, n_layers=61, n_dense_layers=3, n_heads=128,
    q_lora_rank=1536, kv_lora_rank=512, qk_nope_head_dim=128, qk_rope_head_dim=64, v_head_dim=128,
    dense_ffn_hidden=18432, moe_ffn_hidden=2048, n_routed_experts=256, n_shared_experts=1,
    top_k=8, n_groups=8, topk_groups=4, routed_scaling=Fraction(5, 2), vocab=129280,
    norm_eps=Fraction(1, 10**6), rope_theta=10000, aux_loss_alpha=Fraction(1, 10**4),
    mtp_depth=1, mtp_lambda=Fraction(3, 10), batch=15360, seq=4096)
"""DeepSeek-V3-671B (docs/ANCHORS.md "Real model configurations"; tech report arXiv 2412.19437
sec. 4.2 and the released config.json): hidden 7168, 61 layers (first 3 dense, FFN 18432),
128 heads, MLA (q LoRA 1536, kv LoRA 512, qk nope 128, qk rope 64, v 128), 256 routed experts +
1 shared (expert FFN 2048), top-8, sigmoid gating, 8 groups / top-4 groups, routed scaling 2.5,
vocab 129280, RMSNorm eps 1e-6, RoPE theta 10000, one MTP module (lambda 0.3), balance loss
alpha 1e-4; batch 15360 sequences of 4096 tokens (the pre-training batch after the ramp-up)."""

DEEPSEEK_DEBUG = DeepSeekConfig(
    name="deepseek_debug", hidden=16, n_layers=4, n_dense_layers=1, n_heads=2, q_lora_rank=8,
    kv_lora_rank=6, qk_nope_head_dim=4, qk_rope_head_dim=4, v_head_dim=3, dense_ffn_hidden=24,
    moe_ffn_hidden=4, n_routed_experts=8, n_shared_experts=1, top_k=2, n_groups=4,
    topk_groups=2, routed_scaling=Fraction(5, 2), vocab=32, norm_eps=Fraction(1, 10**6),
    rope_theta=10000, aux_loss_alpha=Fraction(1, 10**4), mtp_depth=1,
    mtp_lambda=Fraction(3, 10), batch=4, seq=8)
"""Tiny DeepSeek-V3 for tests: 4 layers (1 dense), 2 heads, q/kv LoRA 8/6, nope/rope/v 4/4/3,
8 routed experts in 4 groups (top-2 groups), top-2 experts, 1 shared, MTP depth 1."""


@dataclass(frozen=True)
class DeepSeekDims:
    """The named dims of a DeepSeek-V3 model (see the module docstring)."""

    B: Dim
    S: Dim
    T: Dim
    H: Dim
    NH: Dim
    QR: Dim
    KVR: Dim
    DN: Dim
    DR: Dim
    DR_half: Dim
    DV: Dim
    F: Dim
    FE: Dim
    FS: Dim
    E: Dim
    V: Dim

    @property
    def llama(self) -> DeepSeekDims:
        """The dims Llama's hooks read (``B, S, T, H, V``): ``self``."""
        return self

    @property
    def moe(self) -> MoEDims:
        """The :class:`~spec_lang.models.moe.MoEDims` view (``E, FE, FS`` and these dims)."""
        return MoEDims(self, self.E, self.FE, self.FS)  # type: ignore[arg-type]

    @staticmethod
    def of(c: DeepSeekConfig) -> DeepSeekDims:
        dr = Dim("DR", c.qk_rope_head_dim)
        return DeepSeekDims(
            B=Dim("B", c.batch), S=Dim("S", c.seq), T=Dim("T", c.seq), H=Dim("H", c.hidden),
            NH=Dim("NH", c.n_heads), QR=Dim("QR", c.q_lora_rank), KVR=Dim("KVR", c.kv_lora_rank),
            DN=Dim("DN", c.qk_nope_head_dim), DR=dr, DR_half=dr.half(),
            DV=Dim("DV", c.v_head_dim), F=Dim("F", c.dense_ffn_hidden),
            FE=Dim("FE", c.moe_ffn_hidden),
            FS=Dim("FS", max(1, c.n_shared_experts) * c.moe_ffn_hidden),
            E=Dim("E", c.n_routed_experts), V=Dim("V", c.vocab))


class DeepSeekContext(MoEContext):
    """The MoE hooks (:class:`~spec_lang.models.moe.MoEContext`) plus ``seq_routing_count``;
    identity everywhere in the spec."""

    def next_position(self, x: Tensor, d: DeepSeekDims) -> Tensor:
        """``x (B, S)`` one position ahead along ``S`` in global order (``y[i] = x[i+1]``, the
        last position 0): the MTP's targets and weights (:func:`spec_lang.cp.shift`). A plan
        that splits ``S`` (context parallelism) overrides it."""
        return shift(x, d.S)

    def seq_routing_count(self, count: Tensor, d: DeepSeekDims) -> Tensor:
        """Routing assignments per sequence and expert ``(B, E)`` over the rank's positions ->
        over the whole sequence (an all-reduce over ``cp`` when a plan splits ``S``). Not
        differentiated."""
        return count


# -- blocks ----------------------------------------------------------------------------------------

def mla(p: Params, x: Tensor, c: DeepSeekConfig, d: DeepSeekDims, ctx: DeepSeekContext) -> Tensor:
    """Multi-head latent attention (report eqs. 1-11), causal; x: (B, S, H) -> (B, S, H).

    Weights as in the module docstring; scale ``1/sqrt(|DN| + |DR|)`` (``softmax_scale``)."""
    h = ctx.enter_tp(x, d)
    cq = ops.rms_norm(ops.einsum(h, p["wq_a"], out=(d.B, d.S, d.QR)), p["q_norm"], d.QR,
                      c.norm_eps)
    q_nope = ops.einsum(cq, p["wq_b.nope"], out=(d.B, d.S, d.NH, d.DN))
    q_rope = ops.rope(ops.einsum(cq, p["wq_b.rope"], out=(d.B, d.S, d.NH, d.DR)),
                      d.S, d.DR, d.DR_half, c.rope_theta)
    ckv = ops.rms_norm(ops.einsum(h, p["wkv_a.kv"], out=(d.B, d.S, d.KVR)), p["kv_norm"], d.KVR,
                       c.norm_eps)
    k_rope = ops.rope(ops.einsum(h, p["wkv_a.rope"], out=(d.B, d.S, d.DR)),
                      d.S, d.DR, d.DR_half, c.rope_theta)                  # shared by all heads
    k_nope = ops.einsum(ckv, p["wkv_b.k"], out=(d.B, d.S, d.NH, d.DN))
    v = ops.einsum(ckv, p["wkv_b.v"], out=(d.B, d.S, d.NH, d.DV))
    k_nope, k_rope, v = (ops.rename(t, d.S, d.T) for t in (k_nope, k_rope, v))
    scores = (ops.einsum(q_nope, k_nope, out=(d.B, d.NH, d.S, d.T))
              + ops.einsum(q_rope, k_rope, out=(d.B, d.NH, d.S, d.T)))
    scores = scores * ops.rsqrt(ops.dim_size(d.DN) + ops.dim_size(d.DR))
    probs = ops.softmax(scores, d.T, mask=ops.causal_mask(d.S, d.T))
    o = ops.einsum(probs, v, out=(d.B, d.S, d.NH, d.DV))
    return ctx.exit_tp(ops.einsum(o, p["wo"], out=(d.B, d.S, d.H)), d)


def dense_mlp(p: Params, x: Tensor, d: DeepSeekDims, ctx: DeepSeekContext) -> Tensor:
    """SwiGLU ``(silu(x w1) * (x w3)) w2``; x: (B, S, H), w1/w3: (H, F), w2: (F, H)."""
    h = ctx.enter_tp(x, d)
    return ctx.exit_tp(swiglu(h, p["w1"], p["w3"], p["w2"], (d.B, d.S, d.H), d.F), d)


def sequence_aux_loss(m: Tensor, probs: Tensor, c: DeepSeekConfig, d: DeepSeekDims,
                      ctx: DeepSeekContext, boundary: str | None = None) -> Tensor:
    """Sequence-wise balance loss (report eqs. 17-20), averaged over the sequences: scalar
    ``mean_B sum_E f P`` with ``f = E/(k |S|) count`` (``count (B, E)``, no gradient) and
    ``P = mean_S(s')``; ``m`` the 0/1 top-k of the affinities (eq. 18: ``TopK(s)``, without
    the selection bias or the group limit) and ``probs = s' = s / sum_E s`` (the normalised
    sigmoid scores), both ``(B, S, E)``. ``|B|`` and ``|S|`` are the global sizes (on a rank
    with a block of the tokens: its addend). ``boundary`` marks the per-sequence losses
    ``(B,)`` as a layer boundary of that name (a cut point: the loss's lemma then sees one
    input per layer instead of every layer's routing; issue 14 item 3)."""
    count = ctx.seq_routing_count(ops.sum(m, d.S), d)                           # (B, E)
    f = ops.stop_gradient(count) * ops.dim_size(d.E) / (ops.dim_size(d.S) * c.top_k)
    pm = ops.mean(probs, d.S)                                                     # (B, E)
    per_seq = ops.sum(f * pm, d.E)                                                # (B,)
    if boundary is not None:
        per_seq = ops.layer_boundary(per_seq, boundary)
    return ops.mean(per_seq, d.B)


def deepseek_moe(p: Params, x: Tensor, c: DeepSeekConfig, d: DeepSeekDims,
                 ctx: DeepSeekContext, bias: Tensor | None) -> tuple[Tensor, Tensor]:
    """DeepSeekMoE layer (report eqs. 12-16; official ``MoE.forward``): x (B, S, H) ->
    ``(y (B, S, H), L_bal ())``. ``y = sum_E g expert_e(x) + shared(x)``, routing by
    :func:`spec_lang.models.moe.router` (group-limited when ``n_groups > 1``), dispatch /
    combine through the context (dense form: zero rows where a token is not routed)."""
    dm = d.moe
    gates, m, probs = router(p, x, c.moe(), dm, bias)
    # eq. 18 counts TopK(s) itself: no bias, no group limit (Megatron-LM's
    # compute_routing_scores_for_aux_loss likewise); top-k of s / sum_E s = top-k of s
    m_aux = ops.topk_mask(probs, d.E, c.top_k)
    xe = ctx.dispatch(x * m, dm)                                                  # (B, S, E, H)
    ye = swiglu(xe, p["experts.w1"], p["experts.w3"], p["experts.w2"], (d.B, d.S, d.E, d.H), d.FE)
    ye = ctx.combine(ye, dm)
    y = ops.einsum(ye, gates, out=(d.B, d.S, d.H))
    if c.n_shared_experts:
        xs = ctx.enter_tp(x, d)
        y = y + ctx.exit_tp(swiglu(xs, p["shared.w1"], p["shared.w3"], p["shared.w2"],
                                   (d.B, d.S, d.H), d.FS), d)
    return y, sequence_aux_loss(m_aux, probs, c, d, ctx, p.prefix + "aux")


def dense_block(p: Params, x: Tensor, c: DeepSeekConfig, d: DeepSeekDims,
                ctx: DeepSeekContext) -> Tensor:
    """Pre-norm block with MLA and the dense FFN: ``h = x + mla(norm(x))``, ``h + mlp(norm(h))``.

    Marks ``<scope>`` (input) and ``<scope>.out`` (output) as layer boundaries."""
    x = ops.layer_boundary(x, p.prefix.rstrip("."))
    h = x + mla(p.scope("attn"), ops.rms_norm(x, p["attention_norm"], d.H, c.norm_eps), c, d, ctx)
    out = h + dense_mlp(p.scope("mlp"), ops.rms_norm(h, p["ffn_norm"], d.H, c.norm_eps), d, ctx)
    return ops.layer_boundary(out, p.prefix + "out")


def moe_block(p: Params, x: Tensor, c: DeepSeekConfig, d: DeepSeekDims, ctx: DeepSeekContext,
              bias: Tensor | None) -> tuple[Tensor, Tensor]:
    """Pre-norm block with MLA and DeepSeekMoE; returns ``(x', L_bal)``.

    Marks ``<scope>`` (input), ``<scope>.out`` (output) and ``<scope>.moe.aux`` (the
    per-sequence balance losses, :func:`sequence_aux_loss`) as layer boundaries."""
    x = ops.layer_boundary(x, p.prefix.rstrip("."))
    h = x + mla(p.scope("attn"), ops.rms_norm(x, p["attention_norm"], d.H, c.norm_eps), c, d, ctx)
    y, aux = deepseek_moe(p.scope("moe"), ops.rms_norm(h, p["ffn_norm"], d.H, c.norm_eps), c, d,
                          ctx, bias)
    return ops.layer_boundary(h + y, p.prefix + "out"), aux


def mtp_module(p: Params, h: Tensor, next_tokens: Tensor, emb: Tensor, head: Tensor,
               c: DeepSeekConfig, d: DeepSeekDims, ctx: DeepSeekContext, bias: Tensor | None
               ) -> tuple[Tensor, Tensor, Tensor]:
    """One MTP module (report eqs. 21-23): ``h (B, S, H)`` the previous depth's representation,
    ``next_tokens (B, S)`` the tokens one step ahead (``t_{i+k}``); ``emb (V, H)`` and
    ``head (H, V)`` the shared embedding and output head. Returns ``(logits (B, S, V),
    h_k (B, S, H), L_bal)``, ``h_k`` after the module's final norm (the next depth's input, as
    Megatron-LM). The block's boundaries are ``<scope>`` / ``<scope>.out``."""
    e = ops.rms_norm(ctx.embed(next_tokens, emb, d), p["enorm"], d.H, c.norm_eps)
    hn = ops.rms_norm(h, p["hnorm"], d.H, c.norm_eps)
    hp = ops.rename(ops.einsum(hn, p["eh_proj.h"], out=(d.B, d.S, "H_out"))
                    + ops.einsum(e, p["eh_proj.e"], out=(d.B, d.S, "H_out")), "H_out", d.H)
    hk, aux = moe_block(p, hp, c, d, ctx, bias)
    hk = ops.rms_norm(hk, p["norm"], d.H, c.norm_eps)
    return ops.einsum(ctx.head_input(hk, d), head, out=(d.B, d.S, d.V)), hk, aux


def deepseek_head(p: Params, x: Tensor, data: Mapping[str, Tensor], c: DeepSeekConfig,
                  d: DeepSeekDims, ctx: DeepSeekContext,
                  bias_of: Callable[[str], Tensor | None] | None = None
                  ) -> tuple[Tensor, Tensor | None, Tensor | None]:
    """Everything after the last main block (a pipeline's last stage): final norm, output head,
    ``L_main = ctx.loss``, then the MTP modules on the final hidden state. ``x (B, S, H)`` the
    last block's output; ``bias_of(name)`` gives an MTP layer's selection bias (default
    ``data.get``). Returns ``(L_main, L_mtp, L_bal of the MTP blocks)`` (None when absent)."""
    bias_of = bias_of or data.get
    h = ops.rms_norm(x, p["norm"], d.H, c.norm_eps)       # the main model's final hidden state
    logits = ops.einsum(ctx.head_input(h, d), p["output"], out=(d.B, d.S, d.V))
    main = ctx.loss(logits, data["labels"], data["mask"], d)
    mtp: Tensor | None = None
    aux: Tensor | None = None
    ahead, target, weight = data["labels"], data["labels"], data["mask"]
    for k in range(c.mtp_depth):
        target, weight = ctx.next_position(target, d), ctx.next_position(weight, d)
        lg, h, a = mtp_module(p.scope(f"mtp.{k}"), h, ahead, p["tok_embeddings"], p["output"],
                              c, d, ctx, bias_of(f"mtp.{k}.moe.e_score_correction_bias"))
        aux = a if aux is None else aux + a
        lk = ctx.loss(lg, target, weight, d)
        mtp = lk if mtp is None else mtp + lk
        ahead = ctx.next_position(ahead, d)
    if mtp is not None and c.mtp_depth > 1:
        mtp = mtp / c.mtp_depth
    return main, mtp, aux


def deepseek_forward(p: Params, data: Mapping[str, Tensor], c: DeepSeekConfig, d: DeepSeekDims,
                     ctx: DeepSeekContext, layers: range | None = None
                     ) -> tuple[Tensor, Tensor | None, Tensor | None]:
    """Embedding, blocks, final norm, head; then the MTP modules. Returns
    ``(L_main, L_mtp, L_bal)``: the masked token-mean cross-entropy (``ctx.loss``), the mean
    over the MTP depths of their cross-entropies (None without MTP) and the sum of the MoE
    layers' balance losses (None without MoE layers). ``layers`` restricts the main blocks (a
    pipeline stage); the embedding, head and MTP are always included here."""
    x = ctx.embed(data["tokens"], p["tok_embeddings"], d)
    aux: Tensor | None = None

    def add_aux(a: Tensor) -> None:
        nonlocal aux
        aux = a if aux is None else aux + a

    for i in layers if layers is not None else range(c.n_layers):
        ps = p.scope(f"layers.{i}")
        if c.is_moe_layer(i):
            x, a = moe_block(ps, x, c, d, ctx, data.get(f"layers.{i}.moe.e_score_correction_bias"))
            add_aux(a)
        else:
            x = dense_block(ps, x, c, d, ctx)
    main, mtp, aux_mtp = deepseek_head(p, x, data, c, d, ctx)
    if aux_mtp is not None:
        add_aux(aux_mtp)
    return main, mtp, aux


@dataclass(frozen=True)
class DeepSeekModel:
    """A DeepSeek-V3 spec: config, dims, parameters, data and the forward with a context hook."""

    config: DeepSeekConfig
    dims: DeepSeekDims
    params: dict[str, tuple[Dim, ...]] = field(repr=False)
    data: dict[str, Data] = field(repr=False)

    def objective(self, main: Tensor, mtp: Tensor | None, aux: Tensor | None) -> Tensor:
        """``L_main + lambda L_mtp + alpha L_bal`` (terms with a zero coefficient dropped)."""
        c = self.config
        out = main
        if mtp is not None and c.mtp_lambda:
            out = out + mtp * c.mtp_lambda
        if aux is not None and c.aux_loss_alpha:
            out = out + aux * c.aux_loss_alpha
        return out

    def forward(self, p: Params, data: Mapping[str, Tensor],
                ctx: DeepSeekContext | None = None) -> Tensor:
        """The training objective; ``ctx`` defaults to the spec's identity context."""
        return self.objective(*deepseek_forward(p, data, self.config, self.dims,
                                                ctx or DeepSeekContext()))

    def spec(self, optimizer: Any, **kw: Any) -> Any:
        """A :class:`~spec_lang.spec.Spec` of one training iteration with ``optimizer``."""
        from spec_lang.spec import Spec  # noqa: PLC0415

        return Spec(params=self.params, data=self.data, forward=self.forward,
                    optimizer=optimizer, **kw)


def _layer_params(pre: str, moe_layer: bool, d: DeepSeekDims, n_shared: int
                  ) -> dict[str, tuple[Dim, ...]]:
    out: dict[str, tuple[Dim, ...]] = {
        pre + "attention_norm": (d.H,),
        pre + "attn.wq_a": (d.H, d.QR),
        pre + "attn.q_norm": (d.QR,),
        pre + "attn.wq_b.nope": (d.QR, d.NH, d.DN),
        pre + "attn.wq_b.rope": (d.QR, d.NH, d.DR),
        pre + "attn.wkv_a.kv": (d.H, d.KVR),
        pre + "attn.wkv_a.rope": (d.H, d.DR),
        pre + "attn.kv_norm": (d.KVR,),
        pre + "attn.wkv_b.k": (d.KVR, d.NH, d.DN),
        pre + "attn.wkv_b.v": (d.KVR, d.NH, d.DV),
        pre + "attn.wo": (d.NH, d.DV, d.H),
        pre + "ffn_norm": (d.H,),
    }
    if not moe_layer:
        out[pre + "mlp.w1"] = (d.H, d.F)
        out[pre + "mlp.w3"] = (d.H, d.F)
        out[pre + "mlp.w2"] = (d.F, d.H)
        return out
    out[pre + "moe.router"] = (d.H, d.E)
    out[pre + "moe.experts.w1"] = (d.E, d.H, d.FE)
    out[pre + "moe.experts.w3"] = (d.E, d.H, d.FE)
    out[pre + "moe.experts.w2"] = (d.E, d.FE, d.H)
    if n_shared:
        out[pre + "moe.shared.w1"] = (d.H, d.FS)
        out[pre + "moe.shared.w3"] = (d.H, d.FS)
        out[pre + "moe.shared.w2"] = (d.FS, d.H)
    return out


def deepseek(config: DeepSeekConfig) -> DeepSeekModel:
    """The DeepSeek-V3 model of ``config``; parameters in order: embedding, layers, final norm,
    head, MTP modules. Data: ``tokens``, ``labels`` (the next tokens), ``mask`` ``(B, S)`` and
    each MoE layer's ``e_score_correction_bias (E,)``.

    Raises:
        SpecError: inconsistent sizes (top_k or groups not fitting E, odd rope dim, more dense
            layers than layers, MTP without a MoE block to copy).
    """
    c = config
    if not 1 <= c.top_k <= c.n_routed_experts:
        raise SpecError(f"{c.name}: top_k={c.top_k} must be in 1..{c.n_routed_experts}")
    if c.n_groups < 1 or c.n_routed_experts % c.n_groups or not 1 <= c.topk_groups <= c.n_groups:
        raise SpecError(f"{c.name}: n_groups={c.n_groups} must divide E={c.n_routed_experts} "
                        f"and topk_groups={c.topk_groups} be in 1..n_groups")
    if c.top_k > c.topk_groups * (c.n_routed_experts // c.n_groups):
        raise SpecError(f"{c.name}: top_k={c.top_k} exceeds the experts of {c.topk_groups} groups")
    if c.qk_rope_head_dim % 2:
        raise SpecError(f"{c.name}: qk_rope_head_dim={c.qk_rope_head_dim} must be even (RoPE)")
    if not 0 <= c.n_dense_layers <= c.n_layers or c.mtp_depth < 0:
        raise SpecError(f"{c.name}: need 0 <= n_dense_layers <= n_layers and mtp_depth >= 0")
    d = DeepSeekDims.of(c)
    params: dict[str, tuple[Dim, ...]] = {"tok_embeddings": (d.V, d.H)}
    data: dict[str, Data] = {"tokens": index(d.B, d.S, range=d.V),
                             "labels": index(d.B, d.S, range=d.V), "mask": mask(d.B, d.S)}
    for i in range(c.n_layers):
        params.update(_layer_params(f"layers.{i}.", c.is_moe_layer(i), d, c.n_shared_experts))
        if c.is_moe_layer(i):
            data[f"layers.{i}.moe.e_score_correction_bias"] = real(d.E)
    params["norm"] = (d.H,)
    params["output"] = (d.H, d.V)
    h_out = Dim("H_out", c.hidden)
    for k in range(c.mtp_depth):
        pre = f"mtp.{k}."
        params[pre + "enorm"] = (d.H,)
        params[pre + "hnorm"] = (d.H,)
        params[pre + "eh_proj.h"] = (d.H, h_out)
        params[pre + "eh_proj.e"] = (d.H, h_out)
        params.update(_layer_params(pre, True, d, c.n_shared_experts))
        params[pre + "norm"] = (d.H,)
        data[pre + "moe.e_score_correction_bias"] = real(d.E)
    return DeepSeekModel(c, d, params, data)


def _numel(dims: tuple[Dim, ...]) -> int:
    n = 1
    for x in dims:
        n *= x.size
    return n


def param_count(config: DeepSeekConfig, *, mtp: bool = True) -> int:
    """Trained parameters of ``config`` counted from the layer formula (no tracing): embedding,
    head, final norm, ``n_dense_layers`` dense and the rest MoE layers, plus (``mtp=True``) the
    MTP modules with the shared embedding / head counted once. The selection biases are data
    (not counted)."""
    d = DeepSeekDims.of(config)
    dense = sum(map(_numel, _layer_params("", False, d, config.n_shared_experts).values()))
    moe_ = sum(map(_numel, _layer_params("", True, d, config.n_shared_experts).values()))
    n = 2 * config.vocab * config.hidden + config.hidden
    n += config.n_dense_layers * dense + (config.n_layers - config.n_dense_layers) * moe_
    if mtp:
        n += config.mtp_depth * (moe_ + 3 * config.hidden + 2 * config.hidden ** 2)
    return n


def activated_param_count(config: DeepSeekConfig) -> int:
    """Parameters a token passes through in the main model (top-k of the routed experts;
    embedding and head included, MTP excluded)."""
    expert = 3 * config.hidden * config.moe_ffn_hidden
    unused = (config.n_routed_experts - config.top_k) * expert
    return param_count(config, mtp=False) - \
        (config.n_layers - config.n_dense_layers) * unused
