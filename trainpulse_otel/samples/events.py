"""What a job's own output said about a failure: one :class:`LogEvent` per line that tells one.

A log reader (:mod:`trainpulse_otel.logs`) turns a watchdog timeout, a transport
error, a CUDA out-of-memory error, a dead process or a driver XID into an
event; the frame carries every event since the previous frame
(:attr:`~.model.Frame.events`) and the detectors judge them. An event quotes its
line (``message``), says where it was written (``hostname``, ``source`` file
and ``line`` number) and by whom (``rank``, ``gpu_index``), and keeps what the
line gives in ``details`` (an op and its sequence number, a timeout, an
exception, an exit code, sizes): flat, JSON-ready values.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from .validation import SampleError, type_name

#: A collective ran past its watchdog's timeout (NCCL's or gloo's watchdog, a heartbeat monitor).
WATCHDOG_TIMEOUT = "watchdog_timeout"
#: The collective transport failed: an NCCL ``NET/IB`` completion error, a connection reset or closed by a peer.
TRANSPORT_ERROR = "transport_error"
#: An allocation failed: ``CUDA out of memory``.
CUDA_OOM = "cuda_oom"
#: A rank's process exited with an error: its traceback's exception, or torchrun's failure report.
PROCESS_FAILED = "process_failed"
#: The NVIDIA driver logged an XID for a GPU (``NVRM: Xid (PCI:…): 79, …``).
DRIVER_XID = "driver_xid"
#: A GPU failing in words other than an XID: lost from the bus, an uncorrected PCIe error, uncorrectable ECC.
GPU_FAULT = "gpu_fault"
#: The job's own stamped lines show time passing with no step completed: from its last step's line to a later
#: stamped line (``since``, ``gap_s``, ``last_step``, ``interval_s`` between its progress lines, the ``phase`` its
#: words since say: ``checkpoint``, ``eval``).
PROGRESS_GAP = "progress_gap"
#: The launcher restarted the job's workers after a failure (torchrun's elastic agent: ``[default] Worker group
#: FAILED. 3/3 attempts left; will restart worker group``): ``state``, ``remaining``, ``max_restarts``, ``role``.
#: A new attempt begins with the next step; no signal of its own.
WORKERS_RESTARTED = "workers_restarted"
#: The job loaded a checkpoint, taking ``duration_s`` where it said (torchtitan's ``Finished loading the checkpoint
#: in 54.49 seconds.``), resuming from ``step`` where it said: the load that ends a restart. No signal of its own.
CHECKPOINT_LOADED = "checkpoint_loaded"
#: The scheduler ended the job (Slurm's ``*** JOB 31182239 ON sh-06-34 CANCELLED AT 2018-11-05T10:35:06 DUE TO
#: PREEMPTION ***``), or a user did (``KeyboardInterrupt``: ^C): ``reason`` (``preemption``, ``time_limit``,
#: ``node_failure``, ``job_requeue``, ``task_failure``, ``signal``, ``cancelled``, ``interrupted``), ``job_id`` and
#: ``node`` where said, ``end`` (``kill`` or ``failure``). The attempt ends there; a requeued job's next step begins
#: a new one. No signal of its own.
JOB_CANCELLED = "job_cancelled"
#: The events after which a job's steps are a new attempt's: the steps it reports again are new, not copies.
NEW_ATTEMPT = frozenset((WORKERS_RESTARTED, CHECKPOINT_LOADED, JOB_CANCELLED))
EVENT_KINDS = (
    WATCHDOG_TIMEOUT,
    TRANSPORT_ERROR,
    CUDA_OOM,
    PROCESS_FAILED,
    DRIVER_XID,
    GPU_FAULT,
    PROGRESS_GAP,
    WORKERS_RESTARTED,
    CHECKPOINT_LOADED,
    JOB_CANCELLED,
)
#: The longest quoted line, and the most details an event keeps.
MAX_MESSAGE = 2048
MAX_DETAILS = 32


@dataclass(frozen=True, slots=True)
class LogEvent:
    """One failure a line of the job's output tells, at ``ts``."""

    ts: float
    kind: str
    message: str
    rank: int | None = None
    hostname: str | None = None
    gpu_index: int | None = None
    source: str | None = None
    line: int | None = None
    details: Mapping[str, Any] = field(default_factory=dict)

    def where(self) -> str:
        """``file:line`` of the line (or what of it is known)."""
        if self.source is None:
            return "" if self.line is None else f"line {self.line}"
        return self.source if self.line is None else f"{self.source}:{self.line}"

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"ts": self.ts, "kind": self.kind, "message": self.message}
        for name in ("rank", "hostname", "gpu_index", "source", "line"):
            value = getattr(self, name)
            if value is not None:
                out[name] = value
        if self.details:
            out["details"] = dict(self.details)
        return out


def parse_log_event(data: Any, where: str = "event") -> LogEvent:
    """A :class:`LogEvent` from its ``to_dict`` form (a trace line); a :class:`SampleError` names what is wrong."""
    if not isinstance(data, Mapping):
        raise SampleError(where, f"must be an object, got {type_name(data)}")
    kind = data.get("kind")
    if kind not in EVENT_KINDS:
        raise SampleError(f"{where}.kind", f"must be one of {', '.join(EVENT_KINDS)}, got {kind!r}")
    return LogEvent(
        ts=_number(data, "ts", where),
        kind=kind,
        message=_text(data, "message", where, required=True)[:MAX_MESSAGE],
        rank=_whole(data, "rank", where),
        hostname=_text(data, "hostname", where),
        gpu_index=_whole(data, "gpu_index", where),
        source=_text(data, "source", where),
        line=_whole(data, "line", where),
        details=_details(data.get("details", {}), f"{where}.details"),
    )


def _number(data: Mapping[str, Any], key: str, where: str) -> float:
    value = data.get(key)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise SampleError(f"{where}.{key}", f"must be a finite number, got {type_name(value)}")
    return float(value)


def _whole(data: Mapping[str, Any], key: str, where: str) -> int | None:
    value = data.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise SampleError(f"{where}.{key}", f"must be a non-negative integer, got {value!r}")
    return value


def _text(data: Mapping[str, Any], key: str, where: str, required: bool = False) -> Any:
    value = data.get(key)
    if value is None and not required:
        return None
    if not isinstance(value, str):
        raise SampleError(f"{where}.{key}", f"must be a string, got {type_name(value)}")
    return value


def _details(value: Any, where: str) -> dict[str, Any]:
    """Flat details: a string, number, boolean or null per key (a list of them too), at most MAX_DETAILS."""
    if not isinstance(value, Mapping) or len(value) > MAX_DETAILS:
        raise SampleError(where, f"must be an object of at most {MAX_DETAILS} values")
    for key, item in value.items():
        items = item if isinstance(item, list) else [item]
        if not all(v is None or isinstance(v, (str, int, float, bool)) for v in items):
            raise SampleError(f"{where}.{key}", f"must be a string, number, boolean or a list of them, got {item!r}")
    return dict(value)
