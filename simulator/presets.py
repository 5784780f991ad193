"""Cluster presets: ``local`` (measured on this machine) and ``paper-geo`` (CheckFree's 500M).

``paper-geo`` rebuilds the geo-distributed setup of CheckFree's throughput experiment
(arXiv 2506.15461; code gensyn-ai/CheckFree at 0e2711d, files named below):

- 7 pipeline stages: the embedding stage 0 and 6 transformer stages of 4 LLaMa layers,
  d_model 1024, 16 heads, sequence 1024, micro-batch 8 sequences, 6 micro-batches per
  iteration, 3 DP replicas per stage: trainer.py (``seq_l``, ``n_layers``, ``batch_size``,
  ``dmodel``, ``send_mbs = 6``, ``partitions`` = 7 x 3 nodes).
- node ``id = 3 * stage + replica`` sits in region ``REGIONS[id % 7]`` and a micro-batch hops
  from ``id`` to ``id + 3`` (trainer.py ``partitions``, ``delay_map``; communication/
  pp_protocol.py ``self.peers[self.meshid + self.stage_size]``).
- link latency and bandwidth per region pair: communication/communication_costs.py
  ``DELAY_BANDWIDTHS`` (ms, GiB/s), copied in full into `GEO_LINKS_MS_GIB_PER_S`. Their
  ``delay_map`` prices a message as ``ms / 1000 + bytes / (GiB/s * 1024**3)``; the two pairs in
  docs/ANCHORS.md are these entries (Australia-Germany 125.5 ms, 0.01046 GiB/s = 85.7 Mibit/s
  "86 Mbit/s"; Belgium-NL 3 ms, 0.2425 GiB/s = 1987 Mibit/s). A pair missing from the table
  (same region) gets trainer.py's fallback ``(10, 0.500)``.
- compute: communication_costs.py ``COMPUTATIONAL_COST`` = 0.055 s "measured per sample per
  layer" (the maximum a micro-batch took). We read it as forward + backward of one sample
  through one layer and split it 1 : 2 (backward = 2 x forward FLOPs: Kaplan et al. 2020,
  Narayanan et al. SC'21). Transformer stage: 0.055 x 8 samples x 4 layers = 1.76 s per
  micro-batch. Embedding stage: its head costs 2 d V FLOPs per token (V = 32000, the LLaMa
  SentencePiece vocabulary of simplellm's ``SPTokenizer``) against 24 d^2 + 4 T d per layer
  (Narayanan et al. SC'21 eq. 2 per layer), i.e. 2.23 layer-equivalents.
- activations: 8 x 1024 x 1024 fp32 = 32 MiB per hop (docs/ANCHORS.md). Gradients per
  transformer stage: 4 layers x 16 d^2 params (4 d^2 attention + 3 x d x 4d SwiGLU) x 4 B =
  268,435,456 B ("about 268 MB", docs/ANCHORS.md); embedding stage: 2 V d params x 4 B.
- restart delay 30 s: the measured recovery stall per stage failure (docs/ANCHORS.md).
- storage: ours, not the paper's (the paper's checkpointing sends weights to the stage-0
  node): an in-region store at trainer.py's same-region link (10 ms, 0.5 GiB/s).

The paper measured 91.35 s per iteration (checkpointing) and 151.04 s (redundant computation,
a measured 1.65x) (docs/ANCHORS.md); `paper_geo_report` prints our prediction beside them.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Any

from simulator.cluster import Cluster, LinkSpec
from simulator.errors import SimulationError
from simulator.model_size import ModelSize, trained_model_size

if TYPE_CHECKING:  # pragma: no cover
    from trainer.api import PipelineTrainer

__all__ = [
    "CLUSTER_PRESETS", "GEO_LINKS_MS_GIB_PER_S", "PAPER_GEO_MICRO_BATCHES", "PAPER_ITERATION_S",
    "PAPER_REDUNDANT_OVERHEAD",
    "local_cluster", "paper_500m_model", "paper_geo_cluster", "paper_geo_iteration_times", "paper_geo_report",
]

CLUSTER_PRESETS = ("local", "paper-geo", "local-real")  # local-real: calibrated (--calibration FILE)

GIB = 1024**3
MIB = 1024**2

# gensyn-ai/CheckFree@0e2711d communication/communication_costs.py DELAY_BANDWIDTHS:
# (latency in ms, bandwidth in GiB/s) per region pair.
GEO_LINKS_MS_GIB_PER_S: dict[tuple[str, str], tuple[float, float]] = {
    ("Australia", "Belgium"): (129, 0.00982666015625),
    ("Australia", "Canada"): (98, 0.01318359375),
    ("Australia", "Germany"): (125.5, 0.01046142578125),
    ("Australia", "Iowa"): (84, 0.01123046875),
    ("Australia", "Japan"): (58, 0.0137939453125),
    ("Australia", "LA"): (69, 0.0146484375),
    ("Australia", "NL"): (128, 0.009521484375),
    ("Australia", "Oregon"): (68, 0.0146484375),
    ("Australia", "Singapore"): (48, 0.02978515625),
    ("Australia", "Taiwan"): (67, 0.02099609375),
    ("Australia", "London"): (132, 0.0093994140625),
    ("Belgium", "Canada"): (41, 0.0198974609375),
    ("Belgium", "Germany"): (4, 0.2425),
    ("Belgium", "Iowa"): (49, 0.0283203125),
    ("Belgium", "Japan"): (112, 0.01171875),
    ("Belgium", "LA"): (70, 0.0194091796875),
    ("Belgium", "NL"): (3, 0.2425),
    ("Belgium", "Oregon"): (66, 0.0208740234375),
    ("Belgium", "Singapore"): (83, 0.01611328125),
    ("Belgium", "Taiwan"): (105, 0.012451171875),
    ("Belgium", "London"): (3.5, 0.2425),
    ("Canada", "Germany"): (44, 0.0318603515625),
    ("Canada", "Iowa"): (14, 0.07568359375),
    ("Canada", "Japan"): (74, 0.01806640625),
    ("Canada", "LA"): (35, 0.030517578125),
    ("Canada", "NL"): (42, 0.0250244140625),
    ("Canada", "Oregon"): (30.5, 0.047119140625),
    ("Canada", "Singapore"): (107, 0.01193847),
    ("Canada", "Taiwan"): (89, 0.01470947265625),
    ("Canada", "London"): (38.5, 0.036376953125),
    ("Germany", "Iowa"): (53.5, 0.026611328125),
    ("Germany", "Japan"): (112, 0.011083984375),
    ("Germany", "LA"): (73, 0.01824951171875),
    ("Germany", "NL"): (3.5, 0.2425),
    ("Germany", "Oregon"): (68, 0.0149169921875),
    ("Germany", "Singapore"): (80, 0.0125),
    ("Germany", "Taiwan"): (102, 0.0125732421875),
    ("Germany", "London"): (6.6, 0.18875),
    ("Iowa", "Japan"): (72.5, 0.01397705078125),
    ("Iowa", "LA"): (23.4, 0.06146240234375),
    ("Iowa", "NL"): (51, 0.02740478515625),
    ("Iowa", "Oregon"): (19.3, 0.09033203125),
    ("Iowa", "Taiwan"): (88, 0.0128),
    ("Iowa", "Singapore"): (101.5, 0.01263427734375),
    ("Iowa", "London"): (48.1, 0.0218505859375),
    ("Japan", "LA"): (50, 0.02777099609375),
    ("Japan", "NL"): (108.5, 0.011376953125),
    ("Japan", "Oregon"): (46.2, 0.03045654296875),
    ("Japan", "Singapore"): (35.6, 0.03900146484375),
    ("Japan", "Taiwan"): (19.2, 0.07672119140625),
    ("Japan", "London"): (107, 0.00888671875),
    ("LA", "NL"): (71.5, 0.014251708984375),
    ("LA", "Oregon"): (12.4, 0.1185302734375),
    ("LA", "Singapore"): (79.5, 0.016845703125),
    ("LA", "Taiwan"): (64, 0.016192626953125),
    ("LA", "London"): (68, 0.0149169921875),
    ("NL", "Oregon"): (67, 0.0203857421875),
    ("NL", "Singapore"): (81.5, 0.016357421875),
    ("NL", "Taiwan"): (105.5, 0.011962890625),
    ("NL", "London"): (4.8, 0.023681640625),
    ("Oregon", "Singapore"): (78.5, 0.01678466796875),
    ("Oregon", "Taiwan"): (59.5, 0.0233154296875),
    ("Oregon", "London"): (64, 0.021240234375),
    ("Singapore", "Taiwan"): (23.2, 0.0618896484375),
    ("Singapore", "London"): (85, 0.01568603515625),
    ("Taiwan", "London"): (109.5, 0.0089599609375),
}
# communication_costs.py get_locations("geo-distributed"): node id % 7 indexes this list.
PAPER_GEO_REGIONS = ("Australia", "Belgium", "Canada", "Germany", "Iowa", "NL", "London")
SAME_REGION_LINK_MS_GIB_PER_S = (10.0, 0.5)  # trainer.py delay_map fallback

PAPER_GEO_MICRO_BATCHES = 6  # trainer.py send_mbs
PAPER_ITERATION_S = {"checkpoint": 91.35, "redundant": 151.04}  # docs/ANCHORS.md (5 % failure rate)

_D_MODEL, _SEQ, _MB_SAMPLES, _LAYERS, _VOCAB = 1024, 1024, 8, 4, 32000  # trainer.py; SPTokenizer
_DP_REPLICAS, _N_STAGES = 3, 6
_SAMPLE_LAYER_S = 0.055  # communication_costs.py COMPUTATIONAL_COST (forward + backward, our reading)
_RESTART_S = 30.0  # docs/ANCHORS.md: measured recovery stall about 30 s per stage failure


def _link(ms: float, gib_per_s: float) -> LinkSpec:
    return LinkSpec(latency_s=ms / 1000.0, bytes_per_s=gib_per_s * GIB)


def paper_500m_model() -> ModelSize:
    """CheckFree's 500M LLaMa as paper-geo runs it: 6 stages x 4 layers, d 1024, V 32000 (fp32 bytes).

    Transformer stage: 4 layers x 16 d^2 parameters (4 d^2 attention + 3 x d x 4d SwiGLU) x 4 B =
    268,435,456 B ("about 268 MB", docs/ANCHORS.md); embedding stage: embedding and head, 2 V d x 4 B
    = 262,144,000 B (norm weights ignored). Total 1.87 GB of parameters (468.8 M), 5.6 GB with Adam.
    Tokens per iteration: 3 DP replicas x 6 micro-batches x 8 sequences x 1024 tokens (trainer.py).
    """
    stage = _LAYERS * 16 * _D_MODEL**2 * 4
    embed = 2 * _VOCAB * _D_MODEL * 4
    return ModelSize(
        name="CheckFree 500M LLaMa (6 x 4 layers, d 1024)",
        stage_param_bytes=(embed,) + (stage,) * _N_STAGES,
        activation_bytes=_MB_SAMPLES * _SEQ * _D_MODEL * 4,
        tokens_per_iteration=_DP_REPLICAS * PAPER_GEO_MICRO_BATCHES * _MB_SAMPLES * _SEQ,
        micro_batches=PAPER_GEO_MICRO_BATCHES,
        sources={"stage_param_bytes": "4 layers x 16 d^2 x 4 B (docs/ANCHORS.md 'about 268 MB'); embedding stage "
                 "2 V d x 4 B, V = 32000 (simplellm SPTokenizer)",
                 "activation_bytes": "8 x 1024 x 1024 x 4 B = 32 MiB (docs/ANCHORS.md)",
                 "tokens_per_iteration": "3 replicas x 6 micro-batches x 8 x 1024 (CheckFree trainer.py)"},
    )


def paper_geo_cluster() -> Cluster:
    """CheckFree's 500M geo-distributed cluster (module docstring gives every source)."""
    layer_fwd_flops = 24 * _D_MODEL**2 + 4 * _SEQ * _D_MODEL  # per token (Narayanan et al. SC'21)
    head_fwd_flops = 2 * _D_MODEL * _VOCAB  # per token
    head_layers = head_fwd_flops / layer_fwd_flops  # ~2.23 layer-equivalents
    stage_total_s = _SAMPLE_LAYER_S * _MB_SAMPLES * _LAYERS  # 1.76 s fwd+bwd per micro-batch
    embed_total_s = _SAMPLE_LAYER_S * _MB_SAMPLES * head_layers
    fwd = (embed_total_s / 3,) + (stage_total_s / 3,) * _N_STAGES
    bwd = (2 * embed_total_s / 3,) + (2 * stage_total_s / 3,) * _N_STAGES
    model = paper_500m_model()
    stage_grad_bytes = model.stage_param_bytes[1]  # 268,435,456 B
    embed_grad_bytes = model.stage_param_bytes[0]
    regions = tuple(tuple(PAPER_GEO_REGIONS[(3 * s + r) % len(PAPER_GEO_REGIONS)] for r in range(_DP_REPLICAS))
                    for s in range(_N_STAGES + 1))
    links = {(min(a, b), max(a, b)): _link(*v) for (a, b), v in GEO_LINKS_MS_GIB_PER_S.items()}
    same = _link(*SAME_REGION_LINK_MS_GIB_PER_S)
    return Cluster(
        name="paper-geo",
        stage_forward_s=fwd,
        stage_backward_s=bwd,
        activation_bytes=_MB_SAMPLES * _SEQ * _D_MODEL * 4,  # 32 MiB
        stage_gradient_bytes=(embed_grad_bytes,) + (stage_grad_bytes,) * _N_STAGES,
        dp_replicas=_DP_REPLICAS,
        default_link=same,
        regions=regions,
        region_links=links,
        storage_bytes_per_s=same.bytes_per_s,
        storage_latency_s=same.latency_s,
        restart_delay_s=_RESTART_S,
        head_on_stage0=True,
        model=model,
        sources={
            "model": "the paper's 500M LLaMa: every transfer, replica, checkpoint is priced with its bytes "
            "(simulator/presets.py paper_500m_model)",
            "stage_forward_s/stage_backward_s": "CheckFree communication_costs.py COMPUTATIONAL_COST 0.055 s/sample/layer "
            "(fwd+bwd, split 1:2); embedding stage = head FLOPs 2dV / layer FLOPs 24d^2+4Td",
            "activation_bytes": "8 x 1024 x 1024 x 4 B = 32 MiB (docs/ANCHORS.md; CheckFree trainer.py)",
            "stage_gradient_bytes": "4 layers x 16 d^2 x 4 B = 268,435,456 B (docs/ANCHORS.md 'about 268 MB')",
            "region_links": "CheckFree communication/communication_costs.py DELAY_BANDWIDTHS (ms, GiB/s)",
            "regions": "CheckFree trainer.py: node id = 3*stage + replica, region = locations[id % 7]",
            "default_link": "CheckFree trainer.py delay_map fallback (10 ms, 0.5 GiB/s)",
            "restart_delay_s": "docs/ANCHORS.md: measured recovery stall ~30 s per stage failure",
            "storage": "ours: an in-region store at the same-region link speed",
            "allreduce": "ring all-reduce (Patarasuk & Yuan 2009); the paper's code sends the whole "
            "gradient to every peer instead (pp_protocol.py SendGradients)",
        },
    )


def local_cluster(trainer: PipelineTrainer, repeats: int = 3, *, n_micro_batches: int | None = None,
                  restart_delay_s: float | None = None) -> Cluster:
    """This machine: stage times measured with ``trainer.measure_stage_times(repeats)``.

    Sizes come from the trainer (``activation_bytes()``, ``stage_param_bytes(s)``). The
    remaining constants are ours and name themselves in ``sources``: a shared-memory link
    (50 us, 10 GB/s), a local disk for checkpoints (1 GB/s), one DP replica. The restart
    delay, unless given, keeps the paper's ratio of restart stall to iteration time
    (30 s / 91.35 s, docs/ANCHORS.md) at this cluster's simulated iteration time: a physical
    30 s against a ~40 ms CPU iteration would make every failure cost ~750 iterations and
    drown the differences between strategies.
    """
    from simulator.schedule import simulate_iteration

    times = trainer.measure_stage_times(repeats)
    n = trainer.n_stages + 1
    if len(times) != n:
        raise SimulationError(f"measure_stage_times returned {len(times)} stages, trainer has {n}")
    base = Cluster(
        name="local",
        stage_forward_s=tuple(float(f) for f, _ in times),
        stage_backward_s=tuple(float(b) for _, b in times),
        activation_bytes=int(trainer.activation_bytes()),
        stage_gradient_bytes=tuple(int(trainer.stage_param_bytes(s)) for s in range(n)),
        dp_replicas=1,
        default_link=LinkSpec(latency_s=50e-6, bytes_per_s=10e9),
        storage_bytes_per_s=1e9,
        restart_delay_s=0.0,
        head_on_stage0=True,
        model=trained_model_size(trainer, _tokens_per_iteration(trainer)),
    )
    source = "given"
    if restart_delay_s is None:
        m = n_micro_batches or getattr(getattr(trainer, "config", None), "n_micro_batches", 4)
        iteration_s = simulate_iteration(base, m, schedule="gpipe").iteration_s
        restart_delay_s = iteration_s * _RESTART_S / PAPER_ITERATION_S["checkpoint"]
        source = (f"scaled: 30 s / 91.35 s (docs/ANCHORS.md) x this cluster's iteration {iteration_s:.4g} s "
                  f"({m} micro-batches, GPipe)")
    return replace(base, restart_delay_s=float(restart_delay_s), sources={
        "stage_forward_s/stage_backward_s": f"measured: PipelineTrainer.measure_stage_times({repeats})",
        "activation_bytes/stage_gradient_bytes": "the trainer's activation_bytes()/stage_param_bytes()",
        "default_link": "ours: shared-memory hop, 50 us + 10 GB/s",
        "storage_bytes_per_s": "ours: local disk 1 GB/s",
        "restart_delay_s": source,
    })


def _tokens_per_iteration(trainer: Any) -> int:
    cfg = getattr(trainer, "config", None)
    return int(getattr(cfg, "tokens_per_iteration", 0) or 0)


PAPER_REDUNDANT_OVERHEAD = 151.04 / 91.35  # docs/ANCHORS.md: measured redundant / checkpointing iteration, 1.653


def paper_geo_iteration_times(schedule: str = "gpipe") -> dict[str, float]:
    """Predicted paper-geo iteration seconds for the strategies' schedules.

    ``checkpoint`` and ``checkfree`` run the plain pipeline; ``checkfree_plus`` swaps stages on
    odd micro-batches (its replica refresh overlaps the iteration: `simulator.run`);
    ``redundant`` is the Bamboo event model (each stage also runs its successor's forward in
    its bubbles, `simulator.schedule`); ``redundant_x2`` doubles every forward instead; and
    ``redundant_imposed`` is the paper's measured 1.653x (``--redundant-overhead``) times the
    plain pipeline. GPipe by default: CheckFree's code starts all micro-batches (up to 3 in
    flight) and aggregates after the last backward, no 1F1B interleaving.
    """
    from simulator.schedule import simulate_iteration

    cluster = paper_geo_cluster()
    m = PAPER_GEO_MICRO_BATCHES
    plain = simulate_iteration(cluster, m, schedule=schedule).iteration_s
    n = cluster.n_stages
    return {
        "checkpoint": plain,
        "checkfree": plain,
        "checkfree_plus": simulate_iteration(cluster, m, schedule=schedule, swap_odd=True).iteration_s,
        "redundant": simulate_iteration(cluster, m, schedule=schedule,
                                        redundant_of=lambda s: (s + 1) % n).iteration_s,
        "redundant_x2": simulate_iteration(cluster, m, schedule=schedule,
                                           forward_multiplier=lambda s: 2.0).iteration_s,
        "redundant_imposed": PAPER_REDUNDANT_OVERHEAD * plain,
    }


def paper_geo_report(schedule: str = "gpipe") -> list[dict[str, Any]]:
    """Rows (strategy, predicted_s, paper_s, ratio) comparing our prediction with the paper."""
    predicted = paper_geo_iteration_times(schedule)
    paper = {"checkpoint": 91.35, "checkfree": 91.32, "checkfree_plus": 91.32, "redundant": 151.04,
             "redundant_x2": 151.04, "redundant_imposed": 151.04}
    return [{"strategy": k, "predicted_s": v, "paper_s": paper[k], "ratio": v / paper[k]} for k, v in predicted.items()]


if __name__ == "__main__":  # pragma: no cover
    for row in paper_geo_report():
        print(f"{row['strategy']:>15}: predicted {row['predicted_s']:8.2f} s   paper {row['paper_s']:8.2f} s"
              f"   ratio {row['ratio']:.3f}")
