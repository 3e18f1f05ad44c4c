"""The catalogue of measurement instruments: names, units, and the sample field each carries.

This table is the single source of the contract's metric names. The OTel
Prometheus exporter turns ``<namespace>.<suffix>`` plus the unit into the
exposed name (``trainpulse.gpu.utilization`` + ``%`` →
``trainpulse_gpu_utilization_percent``), so the units here are chosen to make
exactly the contract's names come out.

The same table drives both directions of the one shared conversion in
:mod:`.conversion`: samples → observations (what the observable gauges report)
and collected points → :class:`~trainpulse_otel.samples.Frame` (what the
diagnostic reader builds).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..samples import PORT_COUNTERS

GPU = "gpu"
HOST = "host"
TRAINING = "training"
RANK = "rank"
NODE = "node"
PORT = "port"


@dataclass(frozen=True, slots=True)
class MetricSpec:
    """One measurement instrument and the sample field behind it.

    ``scale`` converts the sample's unit to the exported one (MHz → Hz).
    ``monotonic`` instruments are observable counters, everything else gauges.
    """

    suffix: str
    unit: str
    scope: str
    field: str
    description: str
    scale: float = 1.0
    monotonic: bool = False


def _g(suffix: str, unit: str, field: str, description: str, **kw: object) -> MetricSpec:
    return MetricSpec(suffix, unit, GPU, field, description, **kw)  # type: ignore[arg-type]


def _h(suffix: str, unit: str, field: str, description: str) -> MetricSpec:
    return MetricSpec(suffix, unit, HOST, field, description)


def _t(suffix: str, unit: str, field: str, description: str) -> MetricSpec:
    return MetricSpec(suffix, unit, TRAINING, field, description)


def _r(suffix: str, unit: str, field: str, description: str) -> MetricSpec:
    return MetricSpec(suffix, unit, RANK, field, description)


def _n(suffix: str, unit: str, field: str, description: str) -> MetricSpec:
    return MetricSpec(suffix, unit, NODE, field, description)


def _port_counters() -> tuple[MetricSpec, ...]:
    """One counter per InfiniBand/RoCE port error counter the samples keep (``ib.port.<counter>``)."""
    return tuple(
        MetricSpec(f"ib.port.{name}", "{error}", PORT, name, f"The port's {name} counter: {meaning}.", monotonic=True)
        for name, meaning in PORT_COUNTERS.items()
    )


MEASUREMENTS: tuple[MetricSpec, ...] = (
    # GPU — attributes gpu.index, gpu.uuid, gpu.name; on a job daemon, another node's GPU also hostname
    _g(
        "gpu.utilization",
        "%",
        "utilization_percent",
        "Percent of time a kernel was running on the GPU (NVML utilization.gpu).",
    ),
    _g(
        "gpu.memory.utilization",
        "%",
        "memory_utilization_percent",
        "Percent of time device memory was being read or written.",
    ),
    _g("gpu.memory.used", "By", "memory_used_bytes", "Device memory in use."),
    _g("gpu.memory.total", "By", "memory_total_bytes", "Device memory installed."),
    _g("gpu.temperature", "Cel", "temperature_celsius", "GPU core temperature."),
    _g("gpu.power", "W", "power_watts", "Board power draw."),
    _g("gpu.power.limit", "W", "power_limit_watts", "Enforced board power limit."),
    _g("gpu.sm_clock", "Hz", "sm_clock_mhz", "Current SM clock.", scale=1e6),
    _g("gpu.sm_clock.max", "Hz", "max_sm_clock_mhz", "Maximum SM clock.", scale=1e6),
    _g(
        "gpu.ecc.uncorrected_errors",
        "{error}",
        "ecc_uncorrected_errors",
        "Uncorrected (volatile) ECC errors since the driver loaded.",
        monotonic=True,
    ),
    _g(
        "gpu.ecc.corrected_errors",
        "{error}",
        "ecc_corrected_errors",
        "Corrected (volatile, single-bit) ECC errors since the driver loaded.",
        monotonic=True,
    ),
    _g(
        "gpu.remapped_rows.pending",
        "1",
        "remapped_rows_pending",
        "1 while a memory row remap waits for a GPU reset to take effect, 0 otherwise.",
    ),
    _g(
        "gpu.remapped_rows.failed",
        "1",
        "remapped_rows_failed",
        "1 once a memory row remap has failed (no spare rows left in a bank), 0 otherwise.",
    ),
    _g(
        "gpu.pcie.replay_errors",
        "{error}",
        "pcie_replay_errors",
        "PCIe replays (link-level retransmissions) since the driver loaded.",
        monotonic=True,
    ),
    _g("gpu.pcie.link.generation", "1", "pcie_link_gen", "The PCIe generation the GPU's link trained at now."),
    _g(
        "gpu.pcie.link.generation.max",
        "1",
        "pcie_link_gen_max",
        "The highest PCIe generation the GPU and slot support.",
    ),
    _g("gpu.pcie.link.width", "{lane}", "pcie_link_width", "The PCIe lanes the GPU's link trained at now."),
    _g("gpu.pcie.link.width.max", "{lane}", "pcie_link_width_max", "The most PCIe lanes the GPU and slot support."),
    _g(
        "gpu.nvlink.crc_errors",
        "{error}",
        "nvlink_crc_errors",
        "NVLink CRC errors (flit and data) since the driver loaded, over the GPU's links.",
        monotonic=True,
    ),
    _g(
        "gpu.nvlink.replay_errors",
        "{error}",
        "nvlink_replay_errors",
        "NVLink replays since the driver loaded, over the GPU's links.",
        monotonic=True,
    ),
    _g(
        "gpu.nvlink.recovery_errors",
        "{error}",
        "nvlink_recovery_errors",
        "NVLink link recoveries since the driver loaded, over the GPU's links.",
        monotonic=True,
    ),
    _g("gpu.nvlink.links_down", "{link}", "nvlink_links_down", "The GPU's NVLinks that are not active."),
    # Host — this node's from the resource (host.name); another node's with the attribute hostname
    _h("host.cpu.utilization", "%", "cpu_percent", "Host CPU utilization across all logical CPUs."),
    _h("host.cpus", "{cpu}", "cpu_count", "Logical CPUs on the host."),
    _h("host.load1", "", "load1", "1-minute load average."),
    _h("host.load5", "", "load5", "5-minute load average."),
    _h("host.load15", "", "load15", "15-minute load average."),
    _h("host.memory.total", "By", "memory_total_bytes", "Host memory installed."),
    _h(
        "host.memory.available",
        "By",
        "memory_available_bytes",
        "Host memory available to new allocations without swapping.",
    ),
    _h("host.swap.total", "By", "swap_total_bytes", "Swap space configured."),
    _h("host.swap.used", "By", "swap_used_bytes", "Swap space in use."),
    _h("host.disk.read", "By/s", "disk_read_bytes_per_sec", "Disk read rate, all disks."),
    _h("host.disk.write", "By/s", "disk_write_bytes_per_sec", "Disk write rate, all disks."),
    _h(
        "host.network.receive",
        "By/s",
        "net_rx_bytes_per_sec",
        "Network receive rate, physical interfaces (loopback and virtual ones excluded).",
    ),
    _h(
        "host.network.transmit",
        "By/s",
        "net_tx_bytes_per_sec",
        "Network transmit rate, physical interfaces (loopback and virtual ones excluded).",
    ),
    # Training job — attributes model, framework
    _t("training.timestamp", "s", "timestamp", "Unix time of the latest training report."),
    _t("training.global_step", "{step}", "global_step", "Optimizer step of the latest training report."),
    _t("training.step_time", "ms", "step_time_ms", "Wall time of one optimizer step."),
    _t("training.tokens", "{token}/s", "tokens_per_sec", "Training throughput in tokens per second, whole job."),
    _t("training.samples", "{sample}/s", "samples_per_sec", "Training throughput in samples per second, whole job."),
    _t("training.mfu", "1", "mfu", "Model FLOPs utilization, 0-1."),
    _t("training.tflops", "{TFLOP}/s", "tflops", "Achieved model TFLOP/s per GPU."),
    _t("training.sequence_length.avg", "{token}", "avg_seq_len", "Mean real (unpadded) sequence length of the batch."),
    _t("training.sequence_length.max", "{token}", "max_seq_len", "Padded sequence length of the batch."),
    _t("training.data_wait", "ms", "data_wait_ms", "Time the step waited for the data loader."),
    _t("training.tokenizer_wait", "ms", "tokenizer_wait_ms", "Time the step waited for tokenization."),
    _t("training.sync_wait", "ms", "sync_wait_ms", "Time spent waiting for peer ranks at synchronisation points."),
    _t("training.all_reduce_wait", "ms", "all_reduce_wait_ms", "Time spent in the gradient all-reduce."),
    _t("training.checkpoint_time", "ms", "checkpoint_ms", "Time the step spent saving a checkpoint."),
    _t(
        "training.checkpoint_load_time",
        "ms",
        "checkpoint_load_ms",
        "Time spent loading a checkpoint to resume from, since the last report.",
    ),
    _t("training.pipeline_bubble_ratio", "1", "pipeline_bubble_ratio", "Idle fraction of the pipeline schedule, 0-1."),
    _t("training.loss", "1", "loss", "Training loss."),
    _t("training.grad_norm", "1", "grad_norm", "Gradient norm before clipping."),
    _t("training.learning_rate", "1", "learning_rate", "Learning rate."),
    _t("training.loss_scale", "1", "loss_scale", "Dynamic loss scale of fp16 mixed precision."),
    _t("training.world_size", "{rank}", "world_size", "Ranks in the job."),
    _t("training.global_batch_size", "{sample}", "global_batch_size", "Samples per optimizer step, whole job."),
    _t("training.micro_batch_size", "{sample}", "micro_batch_size", "Samples per micro-batch per rank."),
    _t(
        "training.gradient_accumulation_steps",
        "{step}",
        "gradient_accumulation_steps",
        "Micro-batches per optimizer step.",
    ),
    _t("training.tensor_parallel_size", "{rank}", "tensor_parallel_size", "Tensor-parallel degree."),
    _t("training.pipeline_parallel_size", "{rank}", "pipeline_parallel_size", "Pipeline-parallel degree."),
    _t("training.data_parallel_size", "{rank}", "data_parallel_size", "Data-parallel degree."),
    # Per rank — attributes rank, gpu.index, hostname
    _r("rank.step_time", "ms", "step_time_ms", "The rank's own step time, not counting waits for peers."),
    _r("rank.tokens", "{token}/s", "tokens_per_sec", "The rank's throughput in tokens per second."),
    _r("rank.data_wait", "ms", "data_wait_ms", "The rank's wait for its data loader."),
    _r("rank.sync_wait", "ms", "sync_wait_ms", "The rank's wait for slower peers."),
    _r("rank.all_reduce_wait", "ms", "all_reduce_wait_ms", "The rank's time in the gradient all-reduce."),
    _r("rank.loss", "1", "loss", "The rank's own training loss."),
    _r("rank.grad_norm", "1", "grad_norm", "The rank's own gradient norm."),
    # Per-rank heartbeat (sent even while the rank's step is blocked)
    _r("rank.global_step", "{step}", "global_step", "The rank's last completed optimizer step (heartbeat)."),
    _r("rank.phase_since", "s", "phase_since", "Unix time the rank entered its current phase (heartbeat)."),
    # InfiniBand/RoCE ports — attributes ib.device, ib.port; another node's also hostname
    *_port_counters(),
    MetricSpec("ib.port.rate", "bit/s", PORT, "rate_gbps", "The rate the port's link trained at.", scale=1e9),
    # Other nodes of the job (a job daemon's view) — attribute hostname; their GPU and host points carry it too
    _n("node.last_seen", "s", "last_seen", "Unix time the node's telemetry last arrived at this job daemon."),
    _n(
        "node.report_interval",
        "s",
        "report_interval_s",
        "How often the node's telemetry arrives: the median gap between its recent exports.",
    ),
)

#: 1 for each active throttle reason of a GPU, 0 for the others (attribute ``reason``).
GPU_THROTTLE = MetricSpec(
    "gpu.throttle.active",
    "1",
    GPU,
    "throttle_reasons",
    "1 while the clock-event (throttle) reason is active on the GPU, 0 otherwise.",
)
#: XIDs seen per GPU and code since the daemon started (attribute ``xid``); a lost GPU keeps its series.
GPU_XID = MetricSpec(
    "gpu.xid.errors",
    "{error}",
    GPU,
    "xid_counts",
    "XID errors the driver reported for the GPU since the daemon started, by XID code.",
    monotonic=True,
)
#: Always 1; the rank's current phase (attribute ``phase``) and its process id (``process.pid``), from its heartbeat.
RANK_PHASE = MetricSpec(
    "rank.phase",
    "1",
    RANK,
    "phase",
    "Always 1; the phase the rank is in now (attribute phase) and its process (process.pid), from its heartbeat.",
)
#: Always 1; an InfiniBand/RoCE port's logical and physical state and link layer (attributes ``state``,
#: ``phys_state``, ``link_layer``).
PORT_INFO = MetricSpec(
    "ib.port.info",
    "1",
    PORT,
    "",
    "Always 1; the port's logical state (attribute state), physical state (phys_state) and link layer.",
)
#: Always 1; carries the job's descriptive strings as attributes.
TRAINING_INFO = MetricSpec(
    "training.info",
    "1",
    TRAINING,
    "",
    "Always 1; the training job's model, framework, precision and kind as attributes.",
)

#: 1 while the latest ``loss``/``grad_norm`` (attribute ``field``; per rank with ``rank``) is NaN or infinite
#: (attribute ``value``: ``nan``, ``inf``, ``-inf``). The OTel SDK drops non-finite measurements, so the loss
#: gauge has no point then: this series says why, and carries the value back into the frame.
NONFINITE = MetricSpec(
    "training.nonfinite",
    "1",
    TRAINING,
    "",
    "1 while the latest loss or gradient norm (attribute field) is NaN or infinite (attribute value).",
)

#: Job descriptors carried by ``training.info``: sample field → attribute key.
TRAINING_INFO_ATTRIBUTES: dict[str, str] = {
    "model_name": "model",
    "model_family": "model_family",
    "framework": "framework",
    "precision": "precision",
    "workload_kind": "workload_kind",
    "hostname": "hostname",
}

ALL_INPUTS: tuple[MetricSpec, ...] = (
    *MEASUREMENTS,
    GPU_THROTTLE,
    TRAINING_INFO,
    GPU_XID,
    NONFINITE,
    RANK_PHASE,
    PORT_INFO,
)
