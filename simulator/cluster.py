"""The cluster model: stages, DP replicas, links, storage, restarts.

Covers the numbers the discrete-event simulator needs to turn a pipeline schedule and the
recovery strategies' actions into seconds:

- per-stage forward / backward seconds per micro-batch (stage 0 = the CheckFree embedding
  stage, 1..S = transformer stages, the indexing of trainer/api.py);
- links between nodes: one message costs ``latency_s + nbytes / bytes_per_s`` and a directed
  link carries one message at a time (a simpy ``Resource`` in `simulator.schedule`);
- DP replicas per stage whose gradients are all-reduced with a ring (`ring_allreduce_s`);
- storage bandwidth (checkpoint writes and reads) and the restart delay of a replacement node.

A node is ``(stage, replica)``. Links between nodes come from ``regions`` (the region of every
node) and ``region_links`` (latency and bandwidth per unordered region pair), falling back to
``default_link``. With ``regions=None`` every link is ``default_link``.

Every constant of a preset names its source in ``Cluster.sources`` (see simulator/presets.py
and docs/simulator.md).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field

from simulator.errors import SimulationError
from simulator.model_size import ModelSize

__all__ = ["LinkSpec", "Cluster", "ring_allreduce_s"]


def _check_nonneg(what: str, value: float, unit: str) -> None:
    if not isinstance(value, (int, float)) or isinstance(value, bool) or not math.isfinite(value) or value < 0:
        raise SimulationError(f"{what} must be a finite number >= 0 {unit}, got {value!r}")


def _check_pos(what: str, value: float, unit: str) -> None:
    if not isinstance(value, (int, float)) or isinstance(value, bool) or math.isnan(value) or value <= 0:
        raise SimulationError(f"{what} must be > 0 {unit}, got {value!r}")


@dataclass(frozen=True)
class LinkSpec:
    """One directed network link: ``transfer_s(n) = latency_s + n / bytes_per_s`` (s).

    The per-message model of CheckFree's simulator (gensyn-ai/CheckFree:
    communication/communication_costs.py ``delay_map``: ``latency/1000 + size/bandwidth``).
    ``bytes_per_s`` may be ``math.inf`` (an ideal link: latency only).
    """

    latency_s: float
    bytes_per_s: float

    def __post_init__(self) -> None:
        _check_nonneg("link latency_s", self.latency_s, "s")
        _check_pos("link bytes_per_s", self.bytes_per_s, "B/s")

    def transfer_s(self, nbytes: int) -> float:
        """Seconds to deliver one message of ``nbytes`` bytes over this link."""
        if nbytes < 0:
            raise SimulationError(f"negative message size {nbytes} bytes")
        return self.latency_s + nbytes / self.bytes_per_s


def ring_allreduce_s(nbytes: int, n_replicas: int, latency_s: float, bytes_per_s: float) -> float:
    """Seconds for a ring all-reduce of ``nbytes`` bytes among ``n_replicas`` nodes.

    T = 2 (N - 1) * (latency_s + (nbytes / N) / bytes_per_s): a reduce-scatter then an
    all-gather, each N - 1 steps that move one 1/N chunk per node (Patarasuk & Yuan,
    "Bandwidth optimal all-reduce algorithms for clusters of workstations", JPDC 69(2), 2009;
    the alpha-beta form 2(p-1)alpha + 2(p-1)/p n beta of Thakur, Rabenseifner & Gropp,
    IJHPCA 19(1), 2005). Every step waits for the slowest link of the ring, so callers pass
    the ring's largest latency and smallest bandwidth. One replica: 0 s.
    """
    if n_replicas < 1:
        raise SimulationError(f"all-reduce needs >= 1 replica, got {n_replicas}")
    if n_replicas == 1:
        return 0.0
    return 2 * (n_replicas - 1) * (latency_s + (nbytes / n_replicas) / bytes_per_s)


@dataclass(frozen=True, kw_only=True)
class Cluster:
    """A pipeline cluster: compute per stage, links, storage, restarts (units in the names).

    Stage indices follow trainer/api.py: 0 is the embedding stage (embedding + final norm +
    head), 1..S the transformer stages. With ``head_on_stage0`` (CheckFree's layout) a
    micro-batch visits stage 0 twice: the embedding lookup first (0 s, a gather) and the
    head + loss after stage S (``stage_forward_s[0]`` / ``stage_backward_s[0]``), so the
    activations travel S -> 0 as one more hop. Without it the pipeline is the plain chain
    0, 1, ..., S and stage 0's times are spent first.
    """

    name: str
    stage_forward_s: tuple[float, ...]  # forward seconds per micro-batch, stage 0..S
    stage_backward_s: tuple[float, ...]  # backward seconds per micro-batch, stage 0..S
    activation_bytes: int  # one micro-batch hop (activations forward, their gradient back)
    stage_gradient_bytes: tuple[int, ...]  # gradient bytes all-reduced per stage per iteration
    dp_replicas: int = 1  # data-parallel replicas per stage
    default_link: LinkSpec
    regions: tuple[tuple[str, ...], ...] | None = None  # regions[stage][replica]
    region_links: Mapping[tuple[str, str], LinkSpec] = field(default_factory=dict)  # sorted pair
    storage_bytes_per_s: float  # checkpoint storage bandwidth (B/s)
    storage_latency_s: float = 0.0  # per storage request (s)
    restart_delay_s: float  # a replacement node joins (s)
    head_on_stage0: bool = True
    # the model this cluster stands for (its bytes price transfers, replicas, checkpoints;
    # simulator/model_size.py); None: the trained model's own bytes (the actions' nbytes)
    model: ModelSize | None = None
    # host memory <-> accelerator copies (Bamboo stashes its redundant activations there)
    host_bytes_per_s: float = 12e9
    node_memory_bytes: int | None = None  # per node; None: not modelled (reported only)
    # seconds per iteration after the last all-reduce: clipping, the optimizer step and, in the real
    # multi-process run, its commit round trip (measured by `local-real`, docs/real-runs.md); 0 elsewhere
    update_s: float = 0.0
    # None: every node computes on its own processor. A number: all stage processes share one host of
    # that many cores with `host_load` runnable threads of other programs (simulator/host.py); the stage
    # times are then CPU seconds of work
    host_cores: float | None = None
    host_load: float = 0.0
    sources: Mapping[str, str] = field(default_factory=dict)  # constant name -> source

    def __post_init__(self) -> None:
        n = len(self.stage_forward_s)
        if n < 2:
            raise SimulationError(f"cluster {self.name!r}: need >= 2 stages, got {n} forward times")
        if len(self.stage_backward_s) != n:
            raise SimulationError(
                f"cluster {self.name!r}: {n} forward times but {len(self.stage_backward_s)} backward times")
        if len(self.stage_gradient_bytes) != n:
            raise SimulationError(
                f"cluster {self.name!r}: {n} stages but {len(self.stage_gradient_bytes)} gradient sizes")
        for i, (f, b) in enumerate(zip(self.stage_forward_s, self.stage_backward_s)):
            _check_nonneg(f"stage {i} forward_s", f, "s")
            _check_nonneg(f"stage {i} backward_s", b, "s")
        for i, g in enumerate(self.stage_gradient_bytes):
            if not isinstance(g, int) or g < 0:
                raise SimulationError(f"stage {i} gradient bytes must be an int >= 0, got {g!r}")
        if not isinstance(self.activation_bytes, int) or self.activation_bytes < 0:
            raise SimulationError(f"activation_bytes must be an int >= 0, got {self.activation_bytes!r}")
        if not isinstance(self.dp_replicas, int) or self.dp_replicas < 1:
            raise SimulationError(f"dp_replicas must be an int >= 1, got {self.dp_replicas!r}")
        _check_pos("storage_bytes_per_s", self.storage_bytes_per_s, "B/s")
        _check_nonneg("storage_latency_s", self.storage_latency_s, "s")
        _check_nonneg("restart_delay_s", self.restart_delay_s, "s")
        _check_pos("host_bytes_per_s", self.host_bytes_per_s, "B/s")
        if self.node_memory_bytes is not None and (not isinstance(self.node_memory_bytes, int)
                                                   or self.node_memory_bytes <= 0):
            raise SimulationError(f"node_memory_bytes must be an int > 0 or None, got {self.node_memory_bytes!r}")
        if self.model is not None and self.model.n_stages != n:
            raise SimulationError(f"cluster {self.name!r}: {n} stages but its model {self.model.name!r} has "
                                  f"{self.model.n_stages}")
        _check_nonneg("update_s", self.update_s, "s")
        if self.host_cores is not None:
            _check_pos("host_cores", self.host_cores, "cores")
        _check_nonneg("host_load", self.host_load, "threads")
        if self.regions is not None:
            if len(self.regions) != n or any(len(r) != self.dp_replicas for r in self.regions):
                shape = [len(r) for r in self.regions]
                raise SimulationError(
                    f"cluster {self.name!r}: regions must be {n} stages x {self.dp_replicas} replicas, got {shape}")

    # -- shape -------------------------------------------------------------------------------
    @property
    def n_stages(self) -> int:
        """Number of stage indices (S + 1: the embedding stage and S transformer stages)."""
        return len(self.stage_forward_s)

    # -- links -------------------------------------------------------------------------------
    def region(self, stage: int, replica: int) -> str | None:
        """The region of node (stage, replica), or None for a single-site cluster."""
        self._check_stage(stage)
        if self.regions is None:
            return None
        return self.regions[stage][replica]

    def link(self, src: tuple[int, int], dst: tuple[int, int]) -> LinkSpec:
        """The link from node ``src = (stage, replica)`` to node ``dst``."""
        a, b = self.region(*src), self.region(*dst)
        if a is None or b is None or a == b:
            return self.default_link
        return self.region_links.get((min(a, b), max(a, b)), self.default_link)

    def transfer_s(self, src_stage: int, dst_stage: int, nbytes: int, replica: int = 0) -> float:
        """Seconds to copy ``nbytes`` from stage ``src_stage`` to ``dst_stage`` (one message)."""
        return self.link((src_stage, replica), (dst_stage, replica)).transfer_s(nbytes)

    # -- collectives, storage, restarts --------------------------------------------------------
    def allreduce_s(self, stage: int) -> float:
        """Seconds of the ring all-reduce of stage ``stage``'s gradients among its replicas.

        The ring is replica 0 -> 1 -> ... -> R-1 -> 0; the slowest of its links bounds every
        step (`ring_allreduce_s`).
        """
        self._check_stage(stage)
        r = self.dp_replicas
        if r == 1:
            return 0.0
        ring = [self.link((stage, i), (stage, (i + 1) % r)) for i in range(r)]
        return ring_allreduce_s(self.stage_gradient_bytes[stage], r,
                                max(lk.latency_s for lk in ring), min(lk.bytes_per_s for lk in ring))

    def storage_s(self, nbytes: int) -> float:
        """Seconds to write or read ``nbytes`` of checkpoint: latency + nbytes / bandwidth."""
        if nbytes < 0:
            raise SimulationError(f"negative storage size {nbytes} bytes")
        return self.storage_latency_s + nbytes / self.storage_bytes_per_s

    # -- persistence ---------------------------------------------------------------------------
    def to_dict(self) -> dict:
        """JSON-able form (`from_dict` inverts it); sweeps store the measured cluster with results."""
        return {
            **{k: getattr(self, k) for k in ("name", "activation_bytes", "dp_replicas", "storage_bytes_per_s",
                                             "storage_latency_s", "restart_delay_s", "head_on_stage0", "update_s",
                                             "host_cores", "host_load")},
            "stage_forward_s": list(self.stage_forward_s), "stage_backward_s": list(self.stage_backward_s),
            "stage_gradient_bytes": list(self.stage_gradient_bytes),
            "default_link": [self.default_link.latency_s, self.default_link.bytes_per_s],
            "regions": None if self.regions is None else [list(r) for r in self.regions],
            "region_links": [[a, b, lk.latency_s, lk.bytes_per_s] for (a, b), lk in self.region_links.items()],
            "model": None if self.model is None else self.model.to_dict(),
            "host_bytes_per_s": self.host_bytes_per_s, "node_memory_bytes": self.node_memory_bytes,
            "sources": dict(self.sources),
        }

    @classmethod
    def from_dict(cls, d: dict) -> Cluster:
        """Rebuild a cluster from `to_dict` output (validated like any other)."""
        try:
            return cls(
                **{k: d[k] for k in ("name", "activation_bytes", "dp_replicas", "storage_bytes_per_s",
                                     "storage_latency_s", "restart_delay_s", "head_on_stage0")},
                stage_forward_s=tuple(d["stage_forward_s"]), stage_backward_s=tuple(d["stage_backward_s"]),
                stage_gradient_bytes=tuple(d["stage_gradient_bytes"]), default_link=LinkSpec(*d["default_link"]),
                update_s=float(d.get("update_s", 0.0)), host_cores=d.get("host_cores"),
                host_load=float(d.get("host_load", 0.0)),
                regions=None if d["regions"] is None else tuple(tuple(r) for r in d["regions"]),
                region_links={(a, b): LinkSpec(lat, bw) for a, b, lat, bw in d["region_links"]},
                model=None if d.get("model") is None else ModelSize.from_dict(d["model"]),
                host_bytes_per_s=d.get("host_bytes_per_s", 12e9), node_memory_bytes=d.get("node_memory_bytes"),
                sources=dict(d.get("sources", {})),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise SimulationError(f"not a cluster description: {exc}") from None

    def _check_stage(self, stage: int) -> None:
        if not 0 <= stage < self.n_stages:
            raise SimulationError(f"stage {stage} does not exist (stages 0..{self.n_stages - 1})")
