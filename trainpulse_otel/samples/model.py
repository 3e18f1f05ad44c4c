"""The sample model: GPU, host, rank and training samples, and the frame of one tick.

Immutable value objects; :mod:`.validation` turns untrusted input into them.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import TYPE_CHECKING, Any, NamedTuple

from .builder import field_replacer

if TYPE_CHECKING:
    from .events import LogEvent
    from .nodes import NodeSample
    from .ports import PortSample
    from .stacks import RankStack, StackFrame

THROTTLE_REASONS: tuple[str, ...] = (
    "gpu_idle",
    "sw_power_cap",
    "hw_slowdown",
    "sw_thermal",
    "hw_thermal",
    "hw_power_brake",
)

DEFAULT_MAX_RANKS = 16384

#: What a rank can be doing now (its heartbeat's ``phase``): the contract's names.
RANK_PHASES: tuple[str, ...] = (
    "data",
    "tokenizer",
    "compute",
    "all_reduce",
    "sync",
    "checkpoint",
    "checkpoint_load",
    "optimizer",
    "eval",
    "idle",
)
#: Phases in which a rank saves or loads a checkpoint: steps are not expected to complete meanwhile.
CHECKPOINT_PHASES = frozenset(("checkpoint", "checkpoint_load"))
#: Phases in which a rank waits inside a collective for its peers.
COLLECTIVE_PHASES = frozenset(("all_reduce", "sync"))


@dataclass(frozen=True, slots=True)
class GpuSample:
    """One GPU at one instant, as NVML (or nvidia-smi, or the simulator) saw it.

    ``node`` is the hostname of the node the GPU is on when a job daemon holds
    the GPUs of several nodes; ``None`` is this daemon's own node. A GPU is
    identified by ``(node, index)`` (:attr:`key`): every node has a GPU 0.
    """

    index: int
    uuid: str | None = None
    name: str | None = None
    utilization_percent: float | None = None
    memory_utilization_percent: float | None = None
    memory_used_bytes: int | None = None
    memory_total_bytes: int | None = None
    temperature_celsius: float | None = None
    power_watts: float | None = None
    power_limit_watts: float | None = None
    sm_clock_mhz: float | None = None
    max_sm_clock_mhz: float | None = None
    throttle_reasons: tuple[str, ...] | None = None
    ecc_uncorrected_errors: int | None = None
    #: Corrected (single-bit) volatile ECC errors since the driver loaded: cumulative, like the uncorrected count.
    ecc_corrected_errors: int | None = None
    #: XID codes the driver reported for this GPU since the previous sample (an event list, not a total).
    xid_errors: tuple[int, ...] | None = None
    #: Row remaps waiting for a GPU reset to take effect (NVML's pending flag: 0 or 1).
    remapped_rows_pending: int | None = None
    #: Row remaps that failed: the bank has no spare rows left (NVML's failure flag: 0 or 1).
    remapped_rows_failed: int | None = None
    #: PCIe replays since the driver loaded (NVML's replay counter: a link retransmitting, cumulative).
    pcie_replay_errors: int | None = None
    #: The PCIe link's generation and width now, and the most the GPU and its slot support: a link trained below
    #: its maximum (x8 of x16, Gen3 of Gen5) carries less and slows its rank.
    pcie_link_gen: int | None = None
    pcie_link_gen_max: int | None = None
    pcie_link_width: int | None = None
    pcie_link_width_max: int | None = None
    #: NVLink errors since the driver loaded, summed over the GPU's links (cumulative): CRC (flit and data),
    #: replays and recoveries (NVML's per-link error counters).
    nvlink_crc_errors: int | None = None
    nvlink_replay_errors: int | None = None
    nvlink_recovery_errors: int | None = None
    #: The GPU's NVLinks that are not up, of those it has (0 on a GPU whose links are all active).
    nvlink_links_down: int | None = None
    node: str | None = None

    @property
    def key(self) -> GpuKey:
        """What identifies this GPU in a job: its node and its index on that node."""
        return (self.node, self.index)

    def on_node(self, node: str | None) -> GpuSample:
        """This sample, on ``node``; a job daemon tags every GPU a node sends (~7x faster than ``replace``)."""
        return self if node == self.node else _WITH_NODE(self, node)


_WITH_NODE = field_replacer(GpuSample, "node")

#: A GPU's identity in a job view: (node hostname or None for this daemon's own node, index on the node).
GpuKey = tuple[str | None, int]


def gpu_subject(key: GpuKey) -> dict[str, str | int]:
    """The subject naming one GPU: its index, and its node's hostname when it is not this daemon's own."""
    node, index = key
    return {"gpu_index": index} if node is None else {"gpu_index": index, "hostname": node}


def own_gpus(gpus: tuple[GpuSample, ...]) -> tuple[GpuSample, ...]:
    """This daemon's own GPUs among a job view's (a frame lists them first, other nodes' after)."""
    return gpus if not gpus or gpus[-1].node is None else tuple(g for g in gpus if g.node is None)


def gpu_order(key: GpuKey) -> tuple[str, int]:
    """The order GPUs are listed in: this daemon's own node first, then each other node's, by index."""
    return (key[0] or "", key[1])


def gpu_label(key: GpuKey) -> str:
    """How messages name a GPU: ``GPU 2`` on this node, ``GPU 2 on node-21`` on another."""
    node, index = key
    return f"GPU {index}" if node is None else f"GPU {index} on {node}"


@dataclass(frozen=True, slots=True)
class XidCount:
    """How many times one XID code has been seen on one GPU since the daemon started.

    The frame carries these totals rather than each sample's list of new codes,
    so a GPU that fell off the bus (and left the GPU list with its XID 79)
    keeps its count, and every reader — Prometheus, the diagnosis — sees one
    monotonic counter per (GPU, code). ``node`` as in :class:`GpuSample`.
    """

    gpu_index: int
    xid: int
    count: int
    node: str | None = None

    @property
    def sort_key(self) -> tuple[str, int, int]:
        """Frames keep XID totals in this order: this node's first, then by node, GPU and code."""
        return (self.node or "", self.gpu_index, self.xid)


@dataclass(frozen=True, slots=True)
class HostSample:
    """The host at one instant: CPU, load, memory, swap, disk and network rates."""

    cpu_percent: float | None = None
    cpu_count: int | None = None
    load1: float | None = None
    load5: float | None = None
    load15: float | None = None
    memory_total_bytes: int | None = None
    memory_available_bytes: int | None = None
    swap_total_bytes: int | None = None
    swap_used_bytes: int | None = None
    disk_read_bytes_per_sec: float | None = None
    disk_write_bytes_per_sec: float | None = None
    net_rx_bytes_per_sec: float | None = None
    net_tx_bytes_per_sec: float | None = None


@dataclass(frozen=True, slots=True)
class RankSample:
    """One rank's view of the latest step; ``gpu_index`` ties it to a GPU.

    ``global_step``, ``phase`` and ``phase_since`` are the rank's heartbeat:
    its last completed step and what it is doing now (one of
    :data:`RANK_PHASES`, since that unix time), sent even while its step is
    blocked; ``pid`` is its process, for a stack dump when it hangs; ``stack`` its
    training thread's Python stack (innermost last), sent once it has stayed in one
    phase for a while (:mod:`.stacks`).
    """

    rank: int
    gpu_index: int | None = None
    hostname: str | None = None
    step_time_ms: float | None = None
    tokens_per_sec: float | None = None
    data_wait_ms: float | None = None
    sync_wait_ms: float | None = None
    all_reduce_wait_ms: float | None = None
    # the rank's own loss and gradient norm (may be NaN or infinite: a diverged rank is data, not bad input)
    loss: float | None = None
    grad_norm: float | None = None
    global_step: int | None = None
    phase: str | None = None
    phase_since: float | None = None
    pid: int | None = None
    stack: tuple[StackFrame, ...] | None = None


#: The parts of a rank's entry that arrive separately: its identity, its heartbeat (every few seconds, also
#: while its step is blocked) and its step measurements (the rank gather, every few steps).
RANK_IDENTITY = ("gpu_index", "hostname")
RANK_HEARTBEAT = ("global_step", "phase", "phase_since", "pid", "stack")
RANK_MEASUREMENTS = tuple(f.name for f in fields(RankSample) if f.name not in ("rank", *RANK_IDENTITY, *RANK_HEARTBEAT))


@dataclass(frozen=True, slots=True)
class TrainingSample:
    """One training-loop report: the contract's training payload."""

    timestamp: float | None = None
    workload_kind: str | None = None
    model_family: str | None = None
    model_name: str | None = None
    framework: str | None = None
    precision: str | None = None
    hostname: str | None = None
    global_step: int | None = None
    step_time_ms: float | None = None
    tokens_per_sec: float | None = None
    samples_per_sec: float | None = None
    mfu: float | None = None
    tflops: float | None = None
    avg_seq_len: float | None = None
    max_seq_len: float | None = None
    data_wait_ms: float | None = None
    tokenizer_wait_ms: float | None = None
    sync_wait_ms: float | None = None
    all_reduce_wait_ms: float | None = None
    checkpoint_ms: float | None = None
    checkpoint_load_ms: float | None = None  # a resume: time spent loading a checkpoint since the last report
    pipeline_bubble_ratio: float | None = None
    loss: float | None = None
    grad_norm: float | None = None
    learning_rate: float | None = None
    world_size: int | None = None
    global_batch_size: int | None = None
    micro_batch_size: int | None = None
    gradient_accumulation_steps: int | None = None
    tensor_parallel_size: int | None = None
    pipeline_parallel_size: int | None = None
    data_parallel_size: int | None = None
    ranks: tuple[RankSample, ...] = ()
    # numerical health (additions): the interval's highest loss, steps the optimizer skipped since the
    # previous report (fp16 overflow), and the dynamic loss scale
    loss_max: float | None = None
    skipped_steps: int | None = None
    loss_scale: float | None = None


class LossPoint(NamedTuple):
    """One reported loss (job-level, or one rank's when ``rank`` is set) as ingest received it.

    Reports can arrive many times per tick; the frame keeps only the newest,
    but :attr:`Frame.losses` carries every point since the previous frame, so
    a one-step spike or NaN between two ticks still reaches the detectors.
    """

    ts: float
    global_step: int | None = None
    loss: float | None = None
    grad_norm: float | None = None
    skipped_steps: int | None = None
    loss_scale: float | None = None
    rank: int | None = None


def loss_points(sample: TrainingSample, ts: float) -> tuple[LossPoint, ...]:
    """The loss points of one report received at ``ts``: the job's, then each rank's that gives one.

    The job point's ``loss`` is the report's worst: a non-finite ``loss`` (or
    ``loss_max``) wins, else the higher of the two, so an interval report's
    one-step spike (``loss_max``) is judged, not hidden behind its last loss.
    Called for every report ingested, so it is kept cheap (a few µs for 8 ranks).
    """
    loss = sample.loss if sample.loss_max is None else _worst_loss(sample.loss, sample.loss_max)
    job = ()
    if loss is not None or sample.grad_norm is not None or sample.skipped_steps is not None or sample.loss_scale:
        at = sample.timestamp if sample.timestamp is not None else ts
        job = (LossPoint(at, sample.global_step, loss, sample.grad_norm, sample.skipped_steps, sample.loss_scale),)
    ranked = [r for r in sample.ranks if r.loss is not None or r.grad_norm is not None]
    if not ranked:
        return job
    step = sample.global_step
    return job + tuple(LossPoint(ts, step, r.loss, r.grad_norm, None, None, r.rank) for r in ranked)


def _worst_loss(loss: float | None, loss_max: float) -> float:
    if loss is None or loss != loss or loss_max != loss_max:  # absent, or NaN: nothing is worse
        return loss_max if loss is None or loss_max != loss_max else loss
    return max(loss, loss_max)  # +inf wins by itself; -inf never does


@dataclass(frozen=True, slots=True)
class Frame:
    """The whole world at one tick: what the diagnostic window holds.

    Produced by the in-process metric reader from collected OTel metrics, or by
    replay from recorded samples through the same conversion.
    """

    ts: float
    gpus: tuple[GpuSample, ...] = ()
    host: HostSample | None = None
    training: TrainingSample | None = None
    #: Cumulative XID counts by GPU and code, sorted (see :class:`XidCount`).
    xid_counts: tuple[XidCount, ...] = ()
    #: Every loss reported since the previous frame (None: this frame's source keeps no such stream).
    losses: tuple[LossPoint, ...] | None = None
    #: The other nodes of the job (a job daemon's view), sorted by hostname; their GPUs are in ``gpus``.
    nodes: tuple[NodeSample, ...] = ()
    #: Every failure the job's own output told since the previous frame (:mod:`.events`).
    events: tuple[LogEvent, ...] = ()
    #: The latest stack of each rank whose heartbeat sent one and that has not moved on since, by rank.
    stacks: tuple[RankStack, ...] = ()
    #: The InfiniBand/RoCE ports of this node (and, on a job daemon, of the others), sorted by :attr:`PortSample.key`.
    ports: tuple[PortSample, ...] = ()


#: A report without its ranks (a slot copy: the window makes one a tick).
_WITHOUT_RANKS = field_replacer(TrainingSample, "ranks")


def history_record(frame: Frame) -> Frame:
    """What of ``frame`` the window's history keeps once a newer frame has come: this node's GPUs, its host
    and the job-level report — all that ``GET /v1/history`` and ``top``'s sparklines show.

    A job daemon's frame holds every node's GPUs and every rank (~1,000 samples at 64 nodes, each node's
    new every second): 300 whole frames were ~130 MB of its memory that nobody read.
    """
    training = frame.training
    if training is not None and training.ranks:
        training = _WITHOUT_RANKS(training, ())
    gpus = own_gpus(frame.gpus)
    if (
        gpus is frame.gpus
        and training is frame.training
        and not (frame.xid_counts or frame.losses or frame.nodes or frame.events or frame.stacks or frame.ports)
    ):
        return frame
    return Frame(frame.ts, gpus, frame.host, training)


# --------------------------------------------------------------- to JSON


def node_gpu_dict(gpu: GpuSample) -> dict[str, Any]:
    """A GPU as a node's GPU list shows it (a trace line, a snapshot's node): the node is the list's, not the GPU's."""
    out = to_dict(gpu)
    out.pop("node", None)
    return out


def to_dict(sample: Any) -> dict[str, Any]:
    """A sample as a JSON-ready dict, leaving out unknown (None) fields."""
    out: dict[str, Any] = {}
    for f in fields(sample):
        value = getattr(sample, f.name)
        if value is None:
            continue
        if f.name == "ranks":
            value = [to_dict(r) for r in value]
        elif f.name == "stack":
            value = [frame._asdict() for frame in value]
        elif isinstance(value, tuple):
            value = list(value)
        out[f.name] = value
    return out
