"""The snapshot: the newest frame and diagnosis, one typed model for the API and the dashboard.

:class:`Snapshot` is what :meth:`~trainpulse_otel.runtime.engine.Engine.snapshot`
returns and what ``trainpulse top`` draws. ``to_dict`` is the contract's JSON
(``GET /v1/snapshot``); ``from_dict`` reads a daemon's JSON back through the
same sample parsers ingest uses, so a local and a remote dashboard see the same
types, and a body that does not fit fails once, at the edge, naming the field.

A job daemon's snapshot also has ``nodes``: every other node of the job with
its GPUs, host, ``last_seen``, ``report_interval_s`` and ``stale`` (silent for
three of its intervals); the top-level ``gpus`` and ``host`` stay this
daemon's own.

The history (``GET /v1/history``) is the window's frames in the snapshot's
shape, without the diagnosis and without per-rank data or other nodes: up to
8192 ranks a frame times ``history_size`` frames would make it large, and the
sparklines need only the job-level numbers.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from ..diagnose.types import Diagnosis
from ..samples import (
    TRAINING_MEASUREMENT_FIELDS,
    Frame,
    GpuSample,
    HostSample,
    NodeSample,
    SampleError,
    TrainingSample,
    node_gpu_dict,
    own_gpus,
    parse_gpus,
    parse_host,
    parse_training,
    to_dict,
    type_name,
)
from ..version import __version__

#: A daemon's own snapshot is not held to the ingest limit: a job daemon merges the ranks of every node.
UNBOUNDED_RANKS = sys.maxsize


@dataclass(frozen=True)
class Snapshot:
    """The newest frame and its diagnosis; ``timestamp`` is None before the first tick."""

    timestamp: float | None
    mode: str
    collectors: tuple[str, ...] = ()
    version: str = __version__
    gpus: tuple[GpuSample, ...] = ()
    host: HostSample | None = None
    training: TrainingSample | None = None
    diagnosis: Diagnosis = field(default_factory=Diagnosis)
    uptime_s: float | None = None
    #: The job's other nodes (a job daemon's view); their GPUs are in ``gpus``, each with its ``node``.
    nodes: tuple[NodeSample, ...] = ()

    @property
    def frame(self) -> Frame | None:
        """The samples as the frame they came from (None before the first tick)."""
        if self.timestamp is None:
            return None
        return Frame(ts=self.timestamp, gpus=self.gpus, host=self.host, training=self.training, nodes=self.nodes)

    def node_gpus(self, hostname: str | None) -> tuple[GpuSample, ...]:
        """The GPUs of one node (``None``: this daemon's own)."""
        return tuple(g for g in self.gpus if g.node == hostname)

    def to_dict(self) -> dict[str, Any]:
        """``{"timestamp", "mode", "collectors", "version", "gpus", "host", "training", "diagnosis", "uptime_s"}``,
        plus ``nodes`` on a job daemon."""
        out: dict[str, Any] = {
            "timestamp": self.timestamp,
            "mode": self.mode,
            "collectors": list(self.collectors),
            "version": self.version,
            **_samples_dict(self.node_gpus(None), self.host, to_dict(self.training) if self.training else None),
            "diagnosis": self.diagnosis.to_dict(),
        }
        if self.uptime_s is not None:
            out["uptime_s"] = self.uptime_s
        if self.nodes:
            out["nodes"] = [self._node_dict(n) for n in self.nodes]
        return out

    def _node_dict(self, node: NodeSample) -> dict[str, Any]:
        gpus = [node_gpu_dict(g) for g in (node.gpus if node.judged else self.node_gpus(node.hostname))]
        out = {
            "hostname": node.hostname,
            "gpus": gpus,
            "host": to_dict(node.host) if node.host else None,
            "last_seen": node.last_seen,
            "report_interval_s": node.report_interval_s,
            "stale": self.timestamp is not None and node.stale(self.timestamp),
        }
        risk = next(
            (r for r in self.diagnosis.node_risk if r.hostname == node.hostname and r.component == "node"), None
        )
        if risk is not None:  # the chance it interrupts the job, from the evidence its GPUs and ports show
            out["risk"] = round(risk.risk, 3)
        if node.signals is not None:  # the node's daemon judges its GPUs and host: its verdict, its active signals
            out["signals"] = [
                {"name": s.name, "severity": s.severity, "subject": dict(s.subject)} for s in node.signals
            ]
        return out

    @classmethod
    def from_dict(cls, data: Any) -> Snapshot:
        """A daemon's ``/v1/snapshot`` body read back; unknown keys are ignored, so a newer daemon still reads.

        Raises :class:`~trainpulse_otel.samples.SampleError` (a ValueError)
        naming the field when the body does not fit: ``gpus[0].index: is required``.
        """
        data = _object(data, "snapshot")
        timestamp = _optional_number(data, "timestamp", "timestamp")
        mode = _text(data.get("mode"), "mode")
        collectors = data.get("collectors", [])
        if not isinstance(collectors, list):
            raise SampleError("collectors", f"must be an array, got {type_name(collectors)}")
        gpus, host, training = _samples(data, "")
        nodes, node_gpus = _nodes(data.get("nodes"))
        if "diagnosis" not in data:
            raise SampleError("diagnosis", "is required")
        return cls(
            timestamp=timestamp,
            mode=mode,
            collectors=tuple(_text(c, f"collectors[{i}]") for i, c in enumerate(collectors)),
            version=_text(data.get("version", ""), "version"),
            gpus=gpus + node_gpus,
            host=host,
            training=training,
            diagnosis=Diagnosis.from_dict(data["diagnosis"], "diagnosis", ts=timestamp or 0.0),
            uptime_s=_optional_number(data, "uptime_s", "uptime_s"),
            nodes=nodes,
        )


def build_snapshot(
    frame: Frame | None,
    diagnosis: Diagnosis,
    mode: str,
    collectors: Sequence[str] = (),
    uptime_s: float | None = None,
) -> Snapshot:
    """The snapshot of one frame (None before the first tick) and the diagnosis of it."""
    return Snapshot(
        timestamp=frame.ts if frame else None,
        mode=mode,
        collectors=tuple(collectors),
        gpus=frame.gpus if frame else (),
        host=frame.host if frame else None,
        training=frame.training if frame else None,
        diagnosis=diagnosis,
        uptime_s=None if uptime_s is None else round(uptime_s, 3),
        nodes=frame.nodes if frame else (),
    )


# ------------------------------------------------------------------ history


def history_to_dict(frames: Sequence[Frame]) -> dict[str, Any]:
    """``{"frames": [{"timestamp", "gpus", "host", "training"}, …]}``, per-rank data left out."""
    return {
        "frames": [
            {"timestamp": f.ts, **_samples_dict(own_gpus(f.gpus), f.host, _job_level(f.training))} for f in frames
        ]
    }


def history_from_dict(data: Any) -> tuple[Frame, ...]:
    """A daemon's ``/v1/history`` body read back, oldest first; a bad frame raises naming ``frames[i]…``."""
    frames = _object(data, "history").get("frames")
    if not isinstance(frames, list):
        raise SampleError("frames", f"must be an array, got {type_name(frames)}")
    return tuple(_frame(item, f"frames[{i}]") for i, item in enumerate(frames))


def _frame(data: Any, where: str) -> Frame:
    data = _object(data, where)
    ts = _optional_number(data, "timestamp", f"{where}.timestamp")
    if ts is None:
        raise SampleError(f"{where}.timestamp", "is required")
    gpus, host, training = _samples(data, f"{where}.")
    return Frame(ts=ts, gpus=gpus, host=host, training=training)


def _job_level(training: TrainingSample | None) -> dict[str, Any] | None:
    """The report without ``ranks``; None when only per-rank data made it a report (a heartbeat of ranks)."""
    if training is None:
        return None
    values = to_dict(replace(training, ranks=()))  # not to_dict(training): thousands of ranks per frame
    del values["ranks"]
    return values if any(name in values for name in TRAINING_MEASUREMENT_FIELDS) else None


# ------------------------------------------------------------------ shared


def _samples_dict(
    gpus: Sequence[GpuSample], host: HostSample | None, training: dict[str, Any] | None
) -> dict[str, Any]:
    return {"gpus": [to_dict(g) for g in gpus], "host": to_dict(host) if host else None, "training": training}


def _samples(
    data: Mapping[str, Any], prefix: str
) -> tuple[tuple[GpuSample, ...], HostSample | None, TrainingSample | None]:
    """The ``gpus``, ``host`` and ``training`` of a snapshot or a frame, through the ingest parsers."""
    gpus = () if data.get("gpus") is None else parse_gpus(data["gpus"], f"{prefix}gpus")
    host = None if data.get("host") is None else parse_host(data["host"], f"{prefix}host")
    raw = data.get("training")
    if raw is None:
        return gpus, host, None
    try:
        return gpus, host, parse_training(raw, max_ranks=UNBOUNDED_RANKS)
    except SampleError as exc:  # the training parser names fields from the payload's root
        raise SampleError(f"{prefix}training" + (f".{exc.field}" if exc.field else ""), exc.message) from None


def _nodes(data: Any) -> tuple[tuple[NodeSample, ...], tuple[GpuSample, ...]]:
    """A job daemon's ``nodes`` read back: the nodes, and their GPUs tagged with their hostnames."""
    if data is None:
        return (), ()
    if not isinstance(data, list):
        raise SampleError("nodes", f"must be an array, got {type_name(data)}")
    nodes, gpus = [], []
    for i, item in enumerate(data):
        where = f"nodes[{i}]"
        item = _object(item, where)
        hostname = _text(item.get("hostname"), f"{where}.hostname")
        last_seen = _optional_number(item, "last_seen", f"{where}.last_seen")
        if last_seen is None:
            raise SampleError(f"{where}.last_seen", "is required")
        node_gpus, host, _ = _samples({"gpus": item.get("gpus"), "host": item.get("host")}, f"{where}.")
        interval = _optional_number(item, "report_interval_s", f"{where}.report_interval_s")
        nodes.append(NodeSample(hostname, last_seen, interval, host))
        gpus.extend(g.on_node(hostname) for g in node_gpus)
    return tuple(nodes), tuple(gpus)


def _object(data: Any, what: str) -> Mapping[str, Any]:
    if not isinstance(data, Mapping):
        raise SampleError("", f"the {what} must be a JSON object, got {type_name(data)}")
    return data


def _text(value: Any, field: str) -> str:
    if not isinstance(value, str):
        raise SampleError(field, f"must be a string, got {type_name(value)}")
    return value


def _optional_number(data: Mapping[str, Any], key: str, field: str) -> float | None:
    value = data.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise SampleError(field, f"must be a number, got {type_name(value)}")
    return float(value)
