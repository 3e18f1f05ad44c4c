"""Cross-layer correlation: what the active signals and the node's state say together.

The root-cause rules ask questions that no single detector can answer:

- rank → GPU → host: which local GPU a straggling rank runs on, and whether
  that GPU is throttled (thermal or power reasons, clocks down) or merely idle
  (starved by its host: CPU contention, a noisy neighbour);
- GPU throttle reasons → clocks → step time: are most GPUs power-capped with
  their clocks down while throughput collapsed?
- data wait → GPU idle → host CPU: is the input pipeline CPU-bound or I/O-bound?
- checkpoint time → GPU idle → disk writes: do saves block training while the
  disk writes at several times its normal rate?
- padding / bubble ratio → MFU: would MFU be normal without the padding or the
  bubble?

:class:`Evidence` gathers the signals by name and subject, the node's per-GPU
state and the detectors' latest statistics once per inference, and answers
these questions with small methods the rules read like sentences.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from ..samples import GpuKey, gpu_order, gpu_subject
from .detectors.llm import MFU, NORMAL_MFU
from .detectors.ranks import RANK_STRAGGLER
from .rank_budget import RankBudgets
from .spec import FactSpec
from .tick import GpuState, NodeState
from .types import CRITICAL, Signal

#: A GPU that showed a thermal throttle reason within this many seconds counts as thermally throttled.
THERMAL_RECENT_S = 120.0
#: Share of recent ticks with a power reason, and clock ratio, for a GPU to count as power-throttled.
POWER_CAPPED_SHARE = 0.5
POWER_CLOCK_RATIO = 0.9
#: Host CPU percent at which the input pipeline counts as CPU-bound.
CPU_BOUND_PERCENT = 85.0


class Evidence:
    """Signals, node state and detector statistics, with the cross-layer questions as methods."""

    def __init__(
        self,
        signals: Iterable[Signal],
        facts: Mapping[str, Any],
        node: NodeState,
        ts: float,
        ranks: RankBudgets | None = None,
    ) -> None:
        self.signals = tuple(signals)
        self.facts = dict(facts)
        self.node = node
        self.ts = ts
        self.ranks = ranks
        #: ids of the signals that the non-residual rules' candidates explain (set before residual rules run).
        self.explained: frozenset[int] = frozenset()
        #: Budget components with measurable lost time that no non-residual candidate claims (set with ``explained``).
        self.unclaimed: frozenset[str] = frozenset()
        self.by_name: dict[str, list[Signal]] = {}
        for s in self.signals:
            self.by_name.setdefault(s.name, []).append(s)

    # ------------------------------------------------------------ signals

    def active(self, name: str) -> list[Signal]:
        """Active signals of that name."""
        return self.by_name.get(name, [])

    def has(self, *names: str) -> bool:
        """True when any of the names is active."""
        return any(name in self.by_name for name in names)

    def job_signal(self, name: str) -> Signal | None:
        """The job-wide (subject-less) signal of that name, if active."""
        for s in self.by_name.get(name, ()):
            if not s.subject:
                return s
        return None

    def gpu_signals(self, *names: str) -> dict[GpuKey, list[Signal]]:
        """Signals about single GPUs, by GPU (node, index)."""
        out: dict[GpuKey, list[Signal]] = {}
        for name in names:
            for s in self.by_name.get(name, ()):
                key = self.subject_gpu(s.subject)
                if key is not None and "rank" not in s.subject:
                    out.setdefault(key, []).append(s)
        return out

    def host_signals(self, *names: str) -> list[Signal]:
        """Signals about the host (no GPU or rank subject)."""
        return [
            s
            for name in names
            for s in self.by_name.get(name, ())
            if "gpu_index" not in s.subject and "rank" not in s.subject and s.subject
        ]

    @staticmethod
    def severity(signals: Iterable[Signal]) -> str:
        """The worst severity among ``signals``."""
        return CRITICAL if any(s.severity == CRITICAL for s in signals) else "warning"

    # ------------------------------------------------------------ ranks ↔ GPUs ↔ hosts

    def subject_gpu(self, subject: Mapping[str, Any]) -> GpuKey | None:
        """The one GPU a signal's subject names, as (node, index): a ``hostname`` of another node of the
        job is that node; this node's own hostname, or none, is this node."""
        index = subject.get("gpu_index")
        if index is None:
            return None
        host = subject.get("hostname")
        return (self.node.node_of(host if isinstance(host, str) else None), int(index))

    def gpu_of(self, straggler: Signal) -> GpuKey | None:
        """The GPU a straggling rank runs on (None when the frame has no GPUs of its host and its node's daemon
        does not judge them)."""
        index = straggler.subject.get("gpu_index")
        host = straggler.subject.get("hostname", straggler.evidence.get("hostname"))
        if index is None or not self.node.is_local(host):
            return None
        key = (self.node.node_of(host), int(index))
        return key if key in self.node.gpus or key[0] in self.node.judged else None

    def stragglers_on(self, gpu: GpuKey) -> list[Signal]:
        """The ``rank_straggler`` signals whose rank runs on GPU ``gpu``."""
        return [s for s in self.active(RANK_STRAGGLER.name) if self.gpu_of(s) == gpu]

    def gpu_subject(self, gpus: Iterable[GpuKey]) -> dict[str, Any]:
        """The subject for a cause local to these GPUs, with the ranks on them (and their nodes' hostnames)."""
        keys = sorted(set(gpus), key=gpu_order)
        ranks = [self.node.rank_of_gpu[g] for g in keys if g in self.node.rank_of_gpu]
        if len(keys) == 1:
            subject: dict[str, Any] = gpu_subject(keys[0])
            if ranks:
                subject["rank"] = ranks[0]
            return subject
        subject = self.gpus_subject(keys)
        if ranks:
            subject["ranks"] = ranks
        return subject

    @staticmethod
    def gpus_subject(gpus: Iterable[GpuKey]) -> dict[str, Any]:
        """The subject naming several GPUs: their indices, and the hostnames of the other nodes they are on."""
        keys = sorted(set(gpus), key=gpu_order)
        subject: dict[str, Any] = {"gpu_indices": [index for _, index in keys]}
        hosts = sorted({node for node, _ in keys if node is not None})
        if hosts:
            subject["hostname"] = hosts[0] if len(hosts) == 1 and all(n is not None for n, _ in keys) else hosts
        return subject

    def node_gpus(self, node: str | None) -> list[GpuKey]:
        """Every GPU of one node (``None``: this daemon's own; a node that judges itself: the GPUs it sent)."""
        if node is not None and node in self.node.judged:
            return [(node, index) for index in self.node.judged[node]]
        return [key for key in self.node.gpus if key[0] == node]

    def rank_budget(self, rank: Any) -> dict[str, float] | None:
        """A rank's recent step budget (ms per step: ``compute``, ``data``, ``sync``), when it is known."""
        return self.ranks.of(rank) if self.ranks is not None and isinstance(rank, int) else None

    # ------------------------------------------------------------ GPU state

    def gpu(self, key: GpuKey) -> GpuState | None:
        return self.node.gpus.get(key)

    def thermally_throttled(self, key: GpuKey) -> bool:
        """Did this GPU show a thermal throttle reason recently?"""
        g = self.node.gpus.get(key)
        return g is not None and g.last_thermal_ts is not None and self.ts - g.last_thermal_ts <= THERMAL_RECENT_S

    def power_throttled(self, key: GpuKey) -> bool:
        """Is this GPU held down by its power limit (reason present most of the time, clocks down)?"""
        g = self.node.gpus.get(key)
        return (
            g is not None
            and g.power_capped >= POWER_CAPPED_SHARE
            and g.clock_ratio is not None
            and g.clock_ratio <= POWER_CLOCK_RATIO
        )

    def power_throttled_gpus(self) -> list[GpuKey]:
        return [k for k in self.node.gpus if self.power_throttled(k)]

    def power_limit_cut(self, key: GpuKey) -> float:
        """How much lower the GPU's power limit is than the highest seen (0.5: halved)."""
        g = self.node.gpus.get(key)
        if g is None or not g.limit or not g.limit_max:
            return 0.0
        return 1.0 - g.limit / g.limit_max

    def median_clock_ratio(self, gpus: Iterable[GpuKey]) -> float | None:
        ratios = sorted(
            r for r in (self.node.gpus[i].clock_ratio for i in gpus if i in self.node.gpus) if r is not None
        )
        return ratios[len(ratios) // 2] if ratios else None

    def util_vs_peers(self, key: GpuKey) -> tuple[float, float] | None:
        """This GPU's smoothed utilisation and its peers' (the other GPUs of its node) median."""
        g = self.node.gpus.get(key)
        peers = sorted(p.util for k, p in self.node.gpus.items() if k != key and k[0] == key[0] and p.util is not None)
        if g is None or g.util is None or not peers:
            return None
        return g.util, peers[len(peers) // 2]

    # ------------------------------------------------------------ job statistics

    def fact(self, spec: FactSpec) -> Any:
        """The latest value of a declared fact (None until its detector has one)."""
        return self.facts.get(spec.name)

    def mfu_without(self, waste: float | None) -> float | None:
        """The MFU the job would reach without a wasted share (padding, bubble)."""
        mfu = self.fact(MFU)
        if mfu is None or waste is None or waste >= 1.0:
            return None
        return mfu / (1.0 - waste)

    def explains_mfu(self, waste: float | None) -> bool:
        """True when removing ``waste`` would bring MFU up to normal (``low_mfu``'s warning bound)."""
        mfu, normal = self.mfu_without(waste), self.fact(NORMAL_MFU)
        return mfu is not None and normal is not None and mfu >= normal

    def host_cpu(self) -> float | None:
        return self.node.host.cpu

    def cpu_bound(self) -> bool:
        cpu = self.node.host.cpu
        return cpu is not None and cpu >= CPU_BOUND_PERCENT
