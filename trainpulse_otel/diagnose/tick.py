"""One tick as the detectors see it: the frame, what is new in it, and the node's smoothed state.

:class:`TickBuilder` turns consecutive frames into :class:`Tick` s. It works out
once per tick what every detector would otherwise redo:

- ``report`` — the training report if it is *new*. The daemon keeps the latest
  report in every frame until it goes stale, so a repeated report is not new
  evidence: reports are told apart by ``timestamp``, ``global_step`` and their
  measurements. A report with ``tflops`` but no ``mfu`` gets its MFU derived
  from the GPUs' peak FLOP rate (matched on their NVML name and the report's
  precision, :mod:`trainpulse_otel.mfu`).
- ``paused`` — every GPU idle at once: training is not running (a checkpoint
  save, an evaluation, a dead job), which is not the same as running badly.
- ``node`` — :class:`NodeState`, smoothed per-GPU and host state (utilisation,
  clock ratio, throttle reasons, the power limit against the highest seen,
  host CPU and disk writes) that detectors and the cross-layer correlation
  both read.

The clock is the frame timestamp; nothing here reads the wall clock.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace

from ..mfu import peak_flops
from ..samples import Frame, GpuKey, GpuSample, HostSample, LossPoint, TrainingSample, loss_points
from .budget import all_reduce_ms
from .stats import RobustBaseline, decay

THERMAL_REASONS = frozenset(("sw_thermal", "hw_thermal", "hw_slowdown"))
POWER_REASONS = frozenset(("sw_power_cap", "hw_power_brake"))
#: A GPU below this utilisation (percent) is idle.
IDLE_UTIL = 5.0
#: A GPU at or above this utilisation (percent) is busy: its temperature reflects load.
BUSY_UTIL = 50.0


class GpuState:
    """One GPU's smoothed state: utilisation and clock ratio are EWMAs (~10 s), ``thermal`` and
    ``power_capped`` EWMAs of 0/1 indicators (the share of recent ticks with such a throttle reason)."""

    __slots__ = (
        "busy_since",
        "clock_ratio",
        "index",
        "key",
        "last_thermal_ts",
        "limit",
        "limit_max",
        "mem_frac",
        "power_capped",
        "reasons",
        "temp",
        "thermal",
        "util",
    )

    def __init__(self, key: GpuKey) -> None:
        self.key = key
        self.index = key[1]
        self.util: float | None = None
        self.clock_ratio: float | None = None
        self.thermal = 0.0
        self.power_capped = 0.0
        self.limit: float | None = None
        self.limit_max = 0.0
        self.last_thermal_ts: float | None = None
        self.busy_since: float | None = None
        self.temp: float | None = None
        self.reasons: tuple[str, ...] = ()
        self.mem_frac: float | None = None

    def busy_for(self, ts: float) -> float:
        """Seconds this GPU has been continuously busy at ``ts`` (0 when idle)."""
        return 0.0 if self.busy_since is None else ts - self.busy_since

    def update(self, gpu: GpuSample, ts: float, keep: float) -> None:
        """Fold in this tick's sample; ``keep`` is the EWMA weight the old state keeps."""
        util = gpu.utilization_percent
        if util is not None:
            first = self.util is None
            self.util = util if first else util + (self.util - util) * keep  # type: ignore[operator]
            if util < BUSY_UTIL:
                self.busy_since = None
            elif self.busy_since is None:
                # busy at first sight: it has been for a while (a trace starts mid-job)
                self.busy_since = float("-inf") if first else ts
        clock, top = gpu.sm_clock_mhz, gpu.max_sm_clock_mhz
        if clock is not None and top and (util is None or util >= BUSY_UTIL):
            ratio = min(1.0, clock / top)
            self.clock_ratio = ratio if self.clock_ratio is None else ratio + (self.clock_ratio - ratio) * keep
        reasons = gpu.throttle_reasons or ()
        self.reasons = reasons
        hot = capped = 0.0
        if reasons:
            for r in reasons:
                if r in THERMAL_REASONS:
                    hot = 1.0
                elif r in POWER_REASONS:
                    capped = 1.0
            if hot:
                self.last_thermal_ts = ts
        self.thermal = hot + (self.thermal - hot) * keep
        self.power_capped = capped + (self.power_capped - capped) * keep
        limit = gpu.power_limit_watts
        if limit:
            self.limit = limit
            if limit > self.limit_max:
                self.limit_max = limit
        self.temp = gpu.temperature_celsius
        used, total = gpu.memory_used_bytes, gpu.memory_total_bytes
        if used is not None and total:
            self.mem_frac = used / total


class HostState:
    """The host's smoothed CPU and disk-write rate, and its normal write rate."""

    __slots__ = ("available_frac", "cpu", "disk_baseline", "disk_write")

    def __init__(self) -> None:
        self.cpu: float | None = None
        self.disk_write: float | None = None
        self.disk_baseline = RobustBaseline(alpha=0.02, warmup=10, band=6.0, min_scale=1e6)
        self.available_frac: float | None = None

    def update(self, host: HostSample, keep: float, paused: bool) -> None:
        """Fold in this tick's host sample; the write baseline learns from training ticks only."""
        cpu = host.cpu_percent
        if cpu is not None:
            self.cpu = cpu if self.cpu is None else cpu + (self.cpu - cpu) * keep
        write = host.disk_write_bytes_per_sec
        if write is not None:
            self.disk_write = write
            if not paused:
                self.disk_baseline.update(write)
        if host.memory_total_bytes and host.memory_available_bytes is not None:
            self.available_frac = host.memory_available_bytes / host.memory_total_bytes

    def write_surge(self) -> float | None:
        """Current disk writes over their normal level (None until the baseline is known)."""
        base = self.disk_baseline
        if self.disk_write is None or not base.ready:
            return None
        return self.disk_write / max(base.loc, 1e6)


class NodeState:
    """Per-GPU and host state, plus which rank runs on which GPU.

    GPUs are keyed by ``(node, index)`` (:data:`~trainpulse_otel.samples.GpuKey`):
    on a job daemon, ``nodes`` are the other nodes of the job whose GPUs the
    frame carries, and a rank whose ``hostname`` is one of them runs on that
    node's GPU; any other rank runs on this daemon's own node (``None``).
    """

    __slots__ = ("gpus", "host", "hostname", "judged", "nodes", "rank_of_gpu")

    def __init__(self) -> None:
        self.gpus: dict[GpuKey, GpuState] = {}
        self.host = HostState()
        self.rank_of_gpu: dict[GpuKey, int] = {}
        self.hostname: str | None = None
        self.nodes: frozenset[str] = frozenset()
        #: The nodes whose daemons judge their own GPUs, with those GPUs' indices (none of them has a state here).
        self.judged: dict[str, tuple[int, ...]] = {}

    def gpu(self, key: GpuKey) -> GpuState | None:
        return self.gpus.get(key)

    def node_of(self, hostname: str | None) -> str | None:
        """The node a rank on ``hostname`` runs on: that node when the job view has it, else this one."""
        return hostname if hostname is not None and hostname in self.nodes else None

    def is_local(self, hostname: str | None) -> bool:
        """Whether a rank on ``hostname`` runs on a node whose GPUs this state holds."""
        return hostname is None or self.hostname is None or hostname == self.hostname or hostname in self.nodes

    def learn_ranks(self, training: TrainingSample) -> None:
        """Map GPUs to the ranks on them (ranks on hosts the frame has no GPUs of are on none of these)."""
        self.hostname = training.hostname or self.hostname
        mapping: dict[GpuKey, int] = {}
        own, nodes = self.hostname, self.nodes
        for r in training.ranks:
            gpu, host = r.gpu_index, r.hostname
            if gpu is None:
                continue
            if host is None or own is None or host == own:  # this node's (``is_local`` without the call)
                mapping.setdefault((host if host in nodes else None, gpu), r.rank)
            elif host in nodes:
                mapping.setdefault((host, gpu), r.rank)
        if mapping:
            self.rank_of_gpu = mapping


class Tick:
    """What detectors read at one tick."""

    __slots__ = (
        "all_reduce_ms",
        "dt",
        "events",
        "frame",
        "gpu_states",
        "gpus",
        "host",
        "losses",
        "node",
        "paused",
        "report",
        "training",
        "ts",
    )

    def __init__(
        self,
        ts: float,
        dt: float,
        frame: Frame,
        report: TrainingSample | None,
        paused: bool,
        node: NodeState,
        losses: tuple[LossPoint, ...] = (),
        gpu_states: list[tuple[GpuSample, GpuState]] | None = None,
    ) -> None:
        self.ts = ts
        self.dt = dt
        self.frame = frame
        self.gpus = frame.gpus
        self.host = frame.host
        self.training = frame.training
        self.report = report
        self.paused = paused
        self.node = node
        #: Every loss reported since the previous tick, in arrival order (see :func:`tick_losses`).
        self.losses = losses
        #: Every failure the job's output told since the previous tick, in arrival order.
        self.events = frame.events
        #: Each of the frame's GPUs with its state, in frame order: the per-GPU detectors look a GPU up once a
        #: tick between them, not once each (256 GPUs on a 32-node job view).
        self.gpu_states = gpu_states if gpu_states is not None else [(g, node.gpus[g.key]) for g in frame.gpus]
        #: The new report's all-reduce time (:func:`~.budget.all_reduce_ms`: a sort over every rank), worked out
        #: once for the budget and ``allreduce_wait``; None without a new report or an all-reduce time.
        self.all_reduce_ms = all_reduce_ms(report) if report is not None else None

    def hosts(self) -> Iterator[tuple[str | None, HostSample]]:
        """This node's host sample (``None``), then each other node's that has one and judges none itself, by
        hostname."""
        if self.host is not None:
            yield None, self.host
        for node in self.frame.nodes:
            if node.host is not None and not node.judged:
                yield node.hostname, node.host


def with_derived_mfu(report: TrainingSample, gpus: tuple[GpuSample, ...]) -> TrainingSample:
    """``report`` with ``mfu`` = achieved TFLOP/s per GPU / the GPU's dense peak, when only ``tflops`` is given."""
    if report.mfu is not None or report.tflops is None:
        return report
    name = next((g.name for g in gpus if g.name), None)
    peak = peak_flops(name, report.precision or "bf16")
    if not peak:
        return report
    return replace(report, mfu=min(1.0, report.tflops * 1e12 / peak))


def report_key(training: TrainingSample) -> tuple:
    """What tells one training report from a repeat of the same one."""
    return (
        training.timestamp,
        training.global_step,
        training.step_time_ms,
        training.tokens_per_sec,
        training.mfu,
        training.data_wait_ms,
        len(training.ranks),
    )


def tick_losses(frame: Frame, report: TrainingSample | None) -> tuple[LossPoint, ...]:
    """The losses to judge at this tick: the frame's stream of every report since the last frame where its
    source keeps one (live and replay), else the new report's own (a frame built by hand)."""
    if frame.losses is not None:
        return frame.losses
    return loss_points(report, frame.ts) if report is not None else ()


def all_idle(gpus: tuple[GpuSample, ...]) -> bool:
    """True when there are GPUs and every one reports utilisation at or below IDLE_UTIL."""
    if not gpus:
        return False
    for g in gpus:
        u = g.utilization_percent
        if u is None or u > IDLE_UTIL:
            return False
    return True


class TickBuilder:
    """Turns consecutive frames into ticks; owns the node state (``tau_s``: its smoothing)."""

    def __init__(self, tau_s: float = 10.0) -> None:
        self.node = NodeState()
        self.tau_s = tau_s
        self._last_ts: float | None = None
        self._last_key: tuple | None = None

    def next(self, frame: Frame) -> Tick:
        """The tick for ``frame`` (frames come in time order)."""
        ts = frame.ts
        first = self._last_ts is None
        dt = 0.0 if first else max(0.0, ts - self._last_ts)  # type: ignore[operator]
        self._last_ts = ts
        report = None
        training = frame.training
        if frame.nodes or self.node.nodes:
            self.node.nodes = frozenset(n.hostname for n in frame.nodes)
            self.node.judged = {n.hostname: tuple(g.index for g in n.gpus) for n in frame.nodes if n.judged}
        if training is not None:
            key = report_key(training)
            if key != self._last_key:
                self._last_key = key
                report = with_derived_mfu(training, frame.gpus)
                if training.ranks:
                    self.node.learn_ranks(training)
        paused = all_idle(frame.gpus)
        keep = 0.0 if first else decay(dt, self.tau_s)
        node = self.node
        states, pairs = node.gpus, []
        for g in frame.gpus:
            key = g.key
            state = states.get(key)
            if state is None:
                state = states[key] = GpuState(key)
            state.update(g, ts, keep)
            pairs.append((g, state))
        if frame.host is not None:
            node.host.update(frame.host, keep, paused)
        return Tick(ts, dt, frame, report, paused, node, tick_losses(frame, report), pairs)
