"""PipelineTrainer: determinism, staged == monolithic, loss scaling, clipping, schedule, snapshots."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from trainer.api import StepResult
from trainer.data import TokenSampler, load_tokens
from trainer.errors import TrainerError
from trainer.model import Llama
from trainer.schedule import MIN_LR_RATIO, learning_rate


def _sampler_for(trainer):
    """A fresh sampler over the same training split and seed as `trainer` (same batches)."""
    cfg = trainer.config
    split = load_tokens(cfg.data, cfg.vocab_size, cfg.context, trainer.cache_dir)
    return TokenSampler(split.train, cfg.context, cfg.seed)


def test_same_seed_gives_identical_losses_and_weights(make_trainer):
    a, b = make_trainer(seed=3), make_trainer(seed=3)
    losses_a = [a.train_step().loss for _ in range(3)]
    losses_b = [b.train_step().loss for _ in range(3)]
    assert losses_a == losses_b
    for s in range(a.n_stages + 1):
        for k, v in a.stage_weights(s).items():
            assert torch.equal(v, b.stage_weights(s)[k]), (s, k)


def test_different_seed_gives_different_losses(make_trainer):
    assert make_trainer(seed=0).train_step().loss != make_trainer(seed=1).train_step().loss


def test_step_result_fields(make_trainer):
    t = make_trainer()
    r = t.train_step()
    assert isinstance(r, StepResult)
    assert r.tokens == 2 * 2 * 16  # M * B * T
    assert len(r.grad_norms) == t.n_stages + 1
    assert math.log(300) - 0.5 < r.loss < math.log(300) + 0.5  # near-uniform at init, V = 300
    assert t.iteration == 1


@pytest.mark.parametrize("n_stages", [2, 3, 5])
def test_staged_loss_equals_one_module_loss(make_trainer, n_stages):
    t = make_trainer(n_stages=n_stages, grad_clip=1e9)
    ref = Llama(t.config)
    ref.load_stages(list(t.stages))
    sampler = _sampler_for(t)
    cfg = t.config
    batches = [sampler.next_batch(cfg.micro_batch_size) for _ in range(cfg.n_micro_batches)]
    x, y = torch.cat([b[0] for b in batches]), torch.cat([b[1] for b in batches])  # (M*B, T)
    ref_loss = F.cross_entropy(ref(x).flatten(0, 1), y.flatten())  # token mean of the whole iteration
    ref_loss.backward()
    result = t.train_step()
    assert abs(result.loss - ref_loss.item()) < 1e-6
    # accumulated, scaled micro-batch gradients == gradient of the iteration's token mean
    ref_params = dict(ref.named_parameters())
    staged = {("embedding." + k): p for k, p in t.stages[0].named_parameters()}
    for i in range(1, n_stages + 1):
        staged.update({f"stages.{i - 1}.{k}": p for k, p in t.stages[i].named_parameters()})
    assert staged.keys() == ref_params.keys()
    for name, p in staged.items():
        torch.testing.assert_close(p.grad, ref_params[name].grad, rtol=1e-5, atol=1e-7, msg=name)


def test_staged_training_equals_one_module_training_without_clipping(make_trainer):
    """Adam is elementwise, so per-stage Adam == one Adam over all parameters (no clipping active)."""
    t = make_trainer(grad_clip=1e9)
    cfg = t.config
    ref = Llama(cfg)
    ref.load_stages(list(t.stages))
    opt = torch.optim.Adam(ref.parameters(), lr=cfg.lr)
    sampler = _sampler_for(t)
    for _ in range(3):
        opt.zero_grad()
        total = 0.0
        for _ in range(cfg.n_micro_batches):
            x, y = sampler.next_batch(cfg.micro_batch_size)
            loss = F.cross_entropy(ref(x).flatten(0, 1), y.flatten(), reduction="sum") / cfg.tokens_per_iteration
            loss.backward()
            total += loss.item()
        opt.step()
        assert abs(t.train_step().loss - total) < 1e-6


def test_per_stage_clipping_records_norm_after_clipping(make_trainer):
    clip = 1e-3
    t = make_trainer(grad_clip=clip)
    r = t.train_step()
    for s in range(t.n_stages + 1):
        grads = [p.grad for p in t.stages[s].parameters()]
        actual = torch.linalg.vector_norm(torch.cat([g.flatten() for g in grads])).item()
        assert abs(actual - r.grad_norms[s]) < 1e-6 * clip + 1e-9
        assert r.grad_norms[s] <= clip  # every stage's gradient is far above 1e-3 at init
        assert r.grad_norms[s] > 0.99 * clip


def test_clip_leaves_small_gradients_alone(make_trainer):
    t = make_trainer(grad_clip=1e6)
    r = t.train_step()
    for s in range(t.n_stages + 1):
        actual = torch.linalg.vector_norm(torch.cat([p.grad.flatten() for p in t.stages[s].parameters()])).item()
        assert actual == pytest.approx(r.grad_norms[s], rel=1e-6)
        assert actual < 10


def test_learning_rate_schedules(make_config):
    const = make_config(lr=1e-2)
    assert [learning_rate(const, i) for i in (0, 5, 10_000)] == [1e-2] * 3
    cos = make_config(lr=1e-2, lr_schedule="cosine", warmup_iters=10, total_iters=110)
    assert learning_rate(cos, 0) == pytest.approx(1e-2 * 1 / 11)
    assert learning_rate(cos, 9) == pytest.approx(1e-2 * 10 / 11)
    assert learning_rate(cos, 10) == pytest.approx(1e-2)
    assert learning_rate(cos, 60) == pytest.approx(1e-2 * MIN_LR_RATIO + 0.5 * (1e-2 - 1e-2 * MIN_LR_RATIO))
    assert learning_rate(cos, 110) == pytest.approx(1e-2 * MIN_LR_RATIO)
    assert learning_rate(cos, 500) == pytest.approx(1e-2 * MIN_LR_RATIO)


def test_optimizer_uses_scheduled_lr(make_trainer):
    t = make_trainer(lr=1e-2, lr_schedule="cosine", warmup_iters=2, total_iters=10)
    for it in range(4):
        t.train_step()
        for s in range(t.n_stages + 1):
            assert t.optimizer(s).param_groups[0]["lr"] == pytest.approx(learning_rate(t.config, it))


def test_snapshot_restore_replays_bit_identically(make_trainer):
    t = make_trainer()
    t.train_step()
    snap = t.snapshot()
    later = [t.train_step().loss for _ in range(3)]
    after = t.stage_weights(2)
    t.restore(snap)
    assert t.iteration == 1
    assert [t.train_step().loss for _ in range(3)] == later
    for k, v in t.stage_weights(2).items():
        assert torch.equal(v, after[k])


def test_evaluate_is_fixed_and_does_not_move_the_data(make_trainer):
    a, b = make_trainer(), make_trainer()
    v1, v2 = a.evaluate(2), a.evaluate(2)
    assert v1 == v2
    assert math.isfinite(v1)
    assert a.train_step().loss == b.train_step().loss  # evaluation did not consume training batches


def test_measure_stage_times_leaves_training_untouched(make_trainer):
    a, b = make_trainer(), make_trainer()
    times = a.measure_stage_times(repeats=2)
    assert len(times) == a.n_stages + 1
    assert all(f > 0 and bw > 0 for f, bw in times)
    assert all(p.grad is None for s in a.stages for p in s.parameters())
    assert a.train_step().loss == b.train_step().loss


def test_sizes_match_formulas(make_trainer):
    t = make_trainer()
    c, v, f, kv = 16, 300, 32, 1 * 8  # d_model, vocab, ffn, n_kv_heads * head_dim
    emb_params = 2 * v * c + c  # embedding, head, final norm
    layer_params = 2 * c + 2 * c * c + 2 * c * kv + 3 * c * f  # 2 norms, wq wo, wk wv, w1 w2 w3
    assert t.stage_param_bytes(0) == 4 * emb_params
    assert t.stage_param_bytes(1) == 4 * layer_params
    assert t.stage_optimizer_bytes(0) == 2 * 4 * emb_params + 4 * 3  # 3 tensors
    assert t.stage_optimizer_bytes(1) == 2 * 4 * layer_params + 4 * 9  # 9 tensors
    assert t.activation_bytes() == 2 * 16 * 16 * 4  # B * T * C fp32
    tokens = 2 * 16
    assert t.flops_per_stage() == (2.0 * tokens * c * v,) + (2.0 * tokens * (layer_params - 2 * c) + 4.0 * 2 * 16 * 16 * c,) * 4
    with pytest.raises(TrainerError, match="out of range"):
        t.stage_param_bytes(5)


@pytest.mark.parametrize("n_stages, odd", [(2, (2, 1)), (3, (2, 3, 1)), (4, (2, 1, 4, 3)), (6, (2, 1, 3, 4, 6, 5))])
def test_swap_schedule_order(make_trainer, n_stages, odd):
    t = make_trainer(n_stages=n_stages)
    plain = tuple(range(1, n_stages + 1))
    assert t.stage_order(1) == plain
    t.swap_odd_micro_batches = True
    assert [t.stage_order(m) for m in range(4)] == [plain, odd, plain, odd]


def test_swap_on_odd_micro_batches_changes_the_computed_loss(make_trainer):
    plain, swapped = make_trainer(grad_clip=1e9), make_trainer(grad_clip=1e9)
    swapped.swap_odd_micro_batches = True
    with torch.no_grad():  # at init the blocks barely touch the residual stream; make them matter
        for t in (plain, swapped):
            for stage in t.stages[1:]:
                for p in stage.parameters():
                    p.mul_(8.0)
    ref = Llama(plain.config)
    ref.load_stages(list(plain.stages))
    sampler = _sampler_for(plain)
    (x0, y0), (x1, y1) = sampler.next_batch(2), sampler.next_batch(2)

    def loss_sum(x, y, order):
        h = ref.embedding.embed(x)
        for s in order:
            h = ref.stages[s - 1](h)
        return F.cross_entropy(ref.embedding.logits(h).flatten(0, 1), y.flatten(), reduction="sum").item()

    tokens = plain.config.tokens_per_iteration
    expected_plain = (loss_sum(x0, y0, (1, 2, 3, 4)) + loss_sum(x1, y1, (1, 2, 3, 4))) / tokens
    expected_swapped = (loss_sum(x0, y0, (1, 2, 3, 4)) + loss_sum(x1, y1, (2, 1, 4, 3))) / tokens
    lp, ls = plain.train_step().loss, swapped.train_step().loss
    assert abs(lp - expected_plain) < 1e-6
    assert abs(ls - expected_swapped) < 1e-6
    assert abs(lp - ls) > 1e-2


def test_swap_with_one_micro_batch_changes_nothing(make_trainer):
    plain, swapped = make_trainer(n_micro_batches=1), make_trainer(n_micro_batches=1)
    swapped.swap_odd_micro_batches = True
    assert plain.train_step().loss == swapped.train_step().loss


def test_lose_stage_makes_the_model_nan(make_trainer):
    t = make_trainer()
    t.train_step()
    t.lose_stage(2)
    assert len(t.optimizer(2).state) == 0
    assert math.isnan(t.evaluate(1))


def test_loss_decreases_on_synthetic_text(make_trainer):
    t = make_trainer()
    first = t.evaluate(2)
    for _ in range(30):
        t.train_step()
    assert t.evaluate(2) < first - 0.5
