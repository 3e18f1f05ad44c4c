"""The vocabulary every stage speaks: GPU, host and training samples.

One validated model serves REST ingest, the in-process monitor, the framework
adapters and trace replay. Samples are immutable value objects
(:mod:`.model`; :mod:`.collected` bundles what one collection saw); the parse
functions (:mod:`.validation`, by the rules of :mod:`.rules`) turn untrusted
JSON-like input into them or raise a :class:`SampleError` that names the
offending field (``ranks[3].step_time_ms``), so every front end can answer a
precise 4xx instead of guessing.
"""

from .collected import Collected
from .events import (
    CUDA_OOM,
    DRIVER_XID,
    EVENT_KINDS,
    GPU_FAULT,
    PROCESS_FAILED,
    TRANSPORT_ERROR,
    WATCHDOG_TIMEOUT,
    LogEvent,
    parse_log_event,
)
from .model import (
    COLLECTIVE_PHASES,
    DEFAULT_MAX_RANKS,
    RANK_PHASES,
    THROTTLE_REASONS,
    Frame,
    GpuKey,
    GpuSample,
    HostSample,
    LossPoint,
    RankSample,
    TrainingSample,
    XidCount,
    gpu_label,
    gpu_order,
    gpu_subject,
    history_record,
    loss_points,
    node_gpu_dict,
    own_gpus,
    to_dict,
)
from .nodes import NODE_SILENT_INTERVALS, NodeReport, NodeSample, NodeSignal
from .parts import RANK_PARTS, carried_parts, heartbeats_only, merged_rank, with_job_description
from .rules import (
    GPU_RULES,
    HOST_RULES,
    MAX_STRING_LENGTH,
    RANK_RULES,
    TRAINING_IDENTITY_FIELDS,
    TRAINING_MEASUREMENT_FIELDS,
    TRAINING_RULES,
    Rule,
)
from .stacks import MAX_STACK_FRAMES, RankStack, StackFrame, with_stacks
from .validation import (
    SampleError,
    check_value,
    has_job_measurement,
    parse_gpu,
    parse_gpus,
    parse_host,
    parse_rank,
    parse_stack,
    parse_training,
    type_name,
)

__all__ = [
    "COLLECTIVE_PHASES",
    "CUDA_OOM",
    "DEFAULT_MAX_RANKS",
    "DRIVER_XID",
    "EVENT_KINDS",
    "GPU_FAULT",
    "GPU_RULES",
    "HOST_RULES",
    "MAX_STACK_FRAMES",
    "MAX_STRING_LENGTH",
    "NODE_SILENT_INTERVALS",
    "PROCESS_FAILED",
    "RANK_PARTS",
    "RANK_PHASES",
    "RANK_RULES",
    "THROTTLE_REASONS",
    "TRAINING_IDENTITY_FIELDS",
    "TRAINING_MEASUREMENT_FIELDS",
    "TRAINING_RULES",
    "TRANSPORT_ERROR",
    "WATCHDOG_TIMEOUT",
    "Collected",
    "Frame",
    "GpuKey",
    "GpuSample",
    "HostSample",
    "LogEvent",
    "LossPoint",
    "NodeReport",
    "NodeSample",
    "NodeSignal",
    "RankSample",
    "RankStack",
    "Rule",
    "SampleError",
    "StackFrame",
    "TrainingSample",
    "XidCount",
    "carried_parts",
    "check_value",
    "gpu_label",
    "gpu_order",
    "gpu_subject",
    "has_job_measurement",
    "heartbeats_only",
    "history_record",
    "loss_points",
    "merged_rank",
    "node_gpu_dict",
    "own_gpus",
    "parse_gpu",
    "parse_gpus",
    "parse_host",
    "parse_log_event",
    "parse_rank",
    "parse_stack",
    "parse_training",
    "to_dict",
    "type_name",
    "with_job_description",
    "with_stacks",
]
