"""DeepSeek-V3 (debug size) on Mesh(dp=2): plain data parallelism, for the model's tests.

Model: spec_lang.models.deepseek.DEEPSEEK_DEBUG (4 layers, the first dense; MLA; 8 routed experts
in 4 groups, top-2 groups, top-2 experts, 1 shared; MTP depth 1; sequence-wise balance loss).

Plan: every parameter and the selection biases replicated; tokens, labels and mask Shard(B) over
dp. Each rank's loss is its addend of the objective: the token means divide by the global token
counts (all-reduced over dp), the balance loss averages over the global ``|B|``; gradients are
summed over dp. Expected: EQUIVALENT.

``build(mutant=...)`` gives the rejected variants the tests use:

* ``"no_group_limit"``: routing over all experts (``topk_groups = n_groups``), as a plan that
  forgets the group restriction of DeepSeek-V3's gate;
* ``"mtp_unshifted"``: the MTP module is trained on ``t_{i+1}`` instead of ``t_{i+2}`` (its
  targets not shifted: an off-by-one in the multi-token-prediction labels);
* ``"mtp_lambda_1"``: the MTP loss weighted 1 instead of lambda = 0.3;
* ``"aux_count_over_dp"``: the balance loss's per-sequence routing counts summed over dp (a
  batch-wise count where eq. 18 counts per sequence), in every MoE layer;
* ``"aux_count_over_dp_one_layer"``: the same in the first MoE layer only (an asymmetric
  layer: its balance-loss cut falls out of its class).
"""

from __future__ import annotations

import dataclasses

from spec_lang import SGD, Axis, Loss, Mesh, Plan, Shard, all_reduce, ops
from spec_lang.models.deepseek import DEEPSEEK_DEBUG, DeepSeekContext, deepseek, deepseek_forward

DP = Axis.DP


def build(mutant: str | None = None, config=DEEPSEEK_DEBUG, optimizer=None):
    """``(spec, plan)``; ``mutant`` one of the names in the module docstring (or None)."""
    model = deepseek(config)
    d = model.dims
    spec = model.spec(optimizer or SGD())
    plan_cfg = config
    if mutant == "no_group_limit":
        plan_cfg = dataclasses.replace(config, topk_groups=config.n_groups)
    elif mutant == "mtp_lambda_1":
        plan_cfg = dataclasses.replace(config, mtp_lambda=1)
    elif mutant not in (None, "mtp_unshifted", "aux_count_over_dp",
                        "aux_count_over_dp_one_layer"):
        raise ValueError(mutant)
    plan_model = deepseek(plan_cfg)

    class DataParallel(DeepSeekContext):
        def loss(self, logits, labels, mask, d):
            ce = ops.cross_entropy_per_token(logits, labels, d.V)
            return ops.sum(mask * ce) / all_reduce(ops.sum(mask), DP)

        if mutant == "mtp_unshifted":
            def next_position(self, x, d):
                return x

        calls = 0

        def seq_routing_count(self, count, d):
            self.calls += 1   # one call per MoE layer, in order (the MTP module's last)
            if mutant == "aux_count_over_dp" or (mutant == "aux_count_over_dp_one_layer"
                                                 and self.calls == 1):
                return all_reduce(count, DP)
            return count

    def forward(p, data):
        seed = plan_model.objective(*deepseek_forward(p, data, plan_cfg, d, DataParallel()))
        return Loss(backward=seed, report=all_reduce(seed, DP))

    plan = Plan(
        mesh=Mesh(dp=2),
        placements={k: {DP: Shard(d.B)} for k in ("tokens", "labels", "mask")},
        forward=forward,
        reduce_grads=lambda name, g: all_reduce(g, DP),
    )
    return spec, plan


spec, plan = build()
