"""TrainPulse's own detectors and root-cause rules, listed in code (as pytest lists its default plugins).

Third-party detectors and rules come from the ``trainpulse.detectors`` and
``trainpulse.root_causes`` entry points (:mod:`trainpulse_otel.runtime.plugins`)
and are checked against these by :class:`~.vocabulary.Vocabulary`. Detectors
judge in this order (by name), and a period's detectors take turns in it;
rules are listed deepest cause first, which is how equal confidence is broken
within a layer. A new detector or rule joins at the end of its list (or its
layer), so the others keep the order the diagnosis was measured with.
"""

from __future__ import annotations

from .detectors.comms import AllreduceWait, SyncImbalance
from .detectors.forecast import GpuOomRisk, HostOomRisk
from .detectors.gpu_faults import GpuHardwareFault
from .detectors.gpu_wear import GpuMemoryDegradation
from .detectors.inputs import DataloaderStarvation, TokenizerStall
from .detectors.links import LinkDegradation
from .detectors.llm import LowMfu, SequencePadding
from .detectors.logged import CollectiveTimeout, NetworkError, OutOfMemory, RankCrashed
from .detectors.memory import GpuMemoryPressure, HostMemoryPressure
from .detectors.nodes import NodeUnreachable
from .detectors.nonfinite import NonfiniteLoss
from .detectors.numerics import LossSpike
from .detectors.ranks import RankStraggler
from .detectors.schedule import CheckpointStall, PipelineBubble
from .detectors.stall import TrainingStalled
from .detectors.thermal import ThermalInstability
from .detectors.thermal_forecast import ThermalThrottleRisk
from .detectors.throughput import GpuUnderutilization, ThroughputCollapse
from .rootcause import failures, gpu_failure, hang, hardware, links, nodes, numerics, ranks, residual, waits
from .vocabulary import Vocabulary

DETECTORS: tuple[type, ...] = (
    AllreduceWait,
    PipelineBubble,
    CheckpointStall,
    DataloaderStarvation,
    GpuHardwareFault,
    GpuMemoryPressure,
    GpuMemoryDegradation,
    GpuOomRisk,
    HostMemoryPressure,
    HostOomRisk,
    LossSpike,
    LowMfu,
    NodeUnreachable,
    NonfiniteLoss,
    SequencePadding,
    RankStraggler,
    TrainingStalled,
    SyncImbalance,
    ThermalInstability,
    ThermalThrottleRisk,
    ThroughputCollapse,
    TokenizerStall,
    GpuUnderutilization,
    CollectiveTimeout,
    NetworkError,
    OutOfMemory,
    RankCrashed,
    LinkDegradation,
)
RULES = (
    nodes.NODES,
    gpu_failure.GPU_FAILURE,
    hardware.THERMAL,
    hardware.POWER,
    hardware.GPU_MEMORY,
    hardware.HOST_MEMORY,
    failures.NETWORK,
    links.INTERCONNECT,
    hang.HANG,
    ranks.STRAGGLER,
    ranks.IMBALANCE,
    failures.RANK_DIED,
    waits.INPUT_PIPELINE,
    waits.TOKENIZER,
    waits.COMMUNICATION,
    waits.CHECKPOINT,
    waits.PIPELINE,
    waits.PADDING,
    residual.RESIDUAL,
    numerics.NUMERICS,
)
#: The built-ins' vocabulary: the contract's signals and causes, and every built-in knob.
VOCABULARY = Vocabulary(DETECTORS, RULES, lambda part: f"{getattr(part, 'name', part)!r} (built-in)")
