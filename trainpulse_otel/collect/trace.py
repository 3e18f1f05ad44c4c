"""Record and read the contract's JSON Lines trace.

Each line holds ``ts`` and exactly one of ``gpus``, ``host``, ``training`` or
``event`` (a failure the job's output told, :mod:`trainpulse_otel.samples.events`);
a ``gpus`` or ``host`` line of a job daemon's trace may carry ``node`` (the other
node it came from; absent: the daemon's own). A node's lines are written on the
ticks it was heard from, so replay judges its liveness from their timestamps.
The writer never takes the daemon down: a full or read-only disk is logged
(once per failure episode) and recording resumes when writes succeed again.
The reader validates every line with the one sample model; a malformed line
is reported with its number and skipped.
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, replace
from typing import IO, Any

import orjson

from ..samples import (
    DEFAULT_MAX_RANKS,
    GpuSample,
    HostSample,
    LogEvent,
    LossPoint,
    NodeSample,
    PortSample,
    SampleError,
    TrainingSample,
    XidCount,
    node_gpu_dict,
    own_gpus,
    parse_gpus,
    parse_host,
    parse_log_event,
    parse_ports,
    parse_training,
    to_dict,
    type_name,
)

log = logging.getLogger(__name__)

KINDS = ("gpus", "host", "training", "event", "ports")
#: Longest trace line read; longer lines are reported and skipped (a 4,096-rank payload is ~1 MB).
MAX_LINE_BYTES = 16 << 20

Payload = tuple[GpuSample, ...] | HostSample | TrainingSample | LogEvent | tuple[PortSample, ...]


@dataclass(frozen=True, slots=True)
class TraceRecord:
    """One valid trace line."""

    lineno: int
    ts: float
    kind: str  # "gpus" | "host" | "training" | "event" | "ports"
    payload: Payload
    node: str | None = None  # the other node a gpus or host line came from (None: the recording daemon's own)


@dataclass(frozen=True, slots=True)
class TraceError:
    """One skipped line and why."""

    lineno: int
    message: str

    def __str__(self) -> str:
        return f"line {self.lineno}: {self.message}"


class TraceWriter:
    """Appends one tick at a time to a JSONL trace file."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._fh: IO[str] | None = None
        self._failing = False
        self._heard: dict[str, float] = {}  # each other node's last_seen as last written
        self._xids_written: dict[tuple[str, int, int], int] = {}  # other nodes' XID totals as last written

    def write_tick(
        self,
        ts: float,
        gpus: Iterable[GpuSample] | None,
        host: HostSample | None,
        training: TrainingSample | None,
        losses: Iterable[LossPoint] = (),
        nodes: Iterable[NodeSample] = (),
        xid_counts: Iterable[XidCount] = (),
        events: Iterable[LogEvent] = (),
        ports: Iterable[PortSample] = (),
    ) -> None:
        """Write the tick's GPU and host samples (and this node's InfiniBand/RoCE ``ports``), and the training
        sample if it is new.

        ``losses``: the job-level losses reported since the last tick besides the newest report's
        (:func:`earlier_losses`); each becomes a training line of its own, before the tick's
        lines and stamped with the tick's time, so replay judges a one-step spike or NaN that
        fell between two ticks as the live daemon did.
        ``nodes``: a job daemon's other nodes, whose GPUs are in ``gpus`` tagged with ``node``;
        each node heard from since the previous tick gets a ``gpus`` and a ``host`` line with its
        ``node`` (an empty ``gpus`` when it sent neither, so its liveness replays). ``xid_counts``: the XID
        totals, other nodes' among them (their daemons count them): what rose since a node's last line goes on
        its GPUs as ``xid_errors``, as the format has it, so replay counts them again. ``events``: the failures
        the job's output told since the last tick, each an ``event`` line at its own time.
        """
        lines = [encode_line(ts, "training", loss_report(p)) for p in losses]
        lines.extend(encode_line(e.ts, "event", e) for e in events)
        gpus = tuple(gpus or ())
        own = own_gpus(gpus)
        if own:
            lines.append(encode_line(ts, "gpus", own))
        if host is not None:
            lines.append(encode_line(ts, "host", host))
        ports = tuple(p for p in ports if p.node is None)
        if ports:
            lines.append(encode_line(ts, "ports", ports))
        lines.extend(self._node_lines(ts, gpus, nodes, xid_counts))
        if training is not None:
            lines.append(encode_line(ts, "training", training))
        if lines:
            self._write("".join(lines))

    def _node_lines(
        self, ts: float, gpus: tuple[GpuSample, ...], nodes: Iterable[NodeSample], xid_counts: Iterable[XidCount]
    ) -> list[str]:
        """The lines of each other node heard from since the previous tick (a silent node writes none)."""
        heard = [n for n in nodes if self._heard.get(n.hostname) != n.last_seen]
        if not heard:
            return []
        by_node: dict[str | None, list[GpuSample]] = {}
        for gpu in gpus:
            by_node.setdefault(gpu.node, []).append(gpu)
        new_xids = self._new_xids(xid_counts)
        lines = []
        for node in heard:
            self._heard[node.hostname] = node.last_seen
            node_gpus = [_with_xids(g, new_xids.get((g.node, g.index))) for g in by_node.get(node.hostname, ())]
            if node_gpus or node.host is None:
                lines.append(encode_line(ts, "gpus", tuple(node_gpus), node.hostname))
            if node.host is not None:
                lines.append(encode_line(ts, "host", node.host, node.hostname))
        return lines

    def _new_xids(self, xid_counts: Iterable[XidCount]) -> dict[tuple[str | None, int], list[int]]:
        """Other nodes' XID codes seen since the last tick written, by GPU (the totals written are kept)."""
        out: dict[tuple[str | None, int], list[int]] = {}
        for x in xid_counts:
            if x.node is None:
                continue  # this node's own XIDs are on its GPUs' samples already
            key = (x.node, x.gpu_index, x.xid)
            rise = x.count - self._xids_written.get(key, 0)
            if rise > 0:
                out.setdefault((x.node, x.gpu_index), []).extend([x.xid] * rise)
                self._xids_written[key] = x.count
        return out

    def _write(self, text: str) -> None:
        try:
            if self._fh is None:
                self._fh = open(self.path, "a", encoding="utf-8")  # noqa: SIM115 - kept open across ticks
            self._fh.write(text)
            self._fh.flush()
        except OSError as exc:
            if not self._failing:
                log.error("recording to %s failed: %s; the daemon goes on and will retry", self.path, exc)
            self._failing = True
            self._reset()
            return
        if self._failing:
            log.info("recording to %s resumed", self.path)
            self._failing = False

    def _reset(self) -> None:
        if self._fh is not None:
            with contextlib.suppress(OSError):
                self._fh.close()
        self._fh = None

    def close(self) -> None:
        """Flush and close the file."""
        self._reset()


def earlier_losses(points: Iterable[LossPoint], newest: TrainingSample | None) -> tuple[LossPoint, ...]:
    """The job-level loss points not carried by ``newest`` (the report the tick records)."""
    carried = None if newest is None else (newest.timestamp, newest.global_step)
    return tuple(p for p in points if p.rank is None and (p.ts, p.global_step) != carried)


def loss_report(point: LossPoint) -> TrainingSample:
    """A job-level loss point as the (partial) training report it came from."""
    return TrainingSample(
        timestamp=point.ts,
        global_step=point.global_step,
        loss=point.loss,
        grad_norm=point.grad_norm,
        skipped_steps=point.skipped_steps,
        loss_scale=point.loss_scale,
    )


def encode_line(ts: float, kind: str, payload: Payload, node: str | None = None) -> str:
    """One trace line (with its newline) for a payload; ``node``: the other node a gpus or host line is of."""
    if kind == "gpus":
        body: Any = [node_gpu_dict(g) for g in payload]  # type: ignore[union-attr]
    elif kind == "event":
        body = {k: v for k, v in payload.to_dict().items() if k != "ts"}  # type: ignore[union-attr]
    elif kind == "ports":
        body = [p.to_dict() for p in payload]  # type: ignore[union-attr]
    else:
        body = to_dict(payload)
    line: dict[str, Any] = {"ts": ts, kind: body} if node is None else {"ts": ts, "node": node, kind: body}
    # NaN/Infinity are written as Python's json writes them: only a loss or gradient norm can hold one
    # (validation refuses them elsewhere), and a recorded NaN loss must replay as NaN
    return json.dumps(line, separators=(",", ":")) + "\n"


def decode_line(text: str, lineno: int, max_ranks: int = DEFAULT_MAX_RANKS) -> TraceRecord:
    """Parse and validate one line; raises ValueError with the reason."""
    return _record(_json_value(text), lineno, max_ranks)


def _json_value(text: str) -> Any:
    """The line's JSON value, read as Python's json reads it (the reader's slow path and its errors)."""
    try:
        return json.loads(text)  # NaN/Infinity read as floats; validation says which fields may hold them
    except json.JSONDecodeError as exc:
        raise ValueError(f"not valid JSON ({exc.msg} at column {exc.colno})") from None


def _record(data: Any, lineno: int, max_ranks: int = DEFAULT_MAX_RANKS) -> TraceRecord:
    """A parsed line validated into a record; raises ValueError with the reason."""
    if not isinstance(data, dict):
        raise ValueError("a trace line must be a JSON object")
    ts = data.get("ts")
    if isinstance(ts, bool) or not isinstance(ts, (int, float)) or not math.isfinite(ts) or ts < 0:
        raise ValueError("ts: must be a finite unix time in seconds")
    kinds = [k for k in KINDS if k in data]
    if len(kinds) != 1:
        raise ValueError(f"must hold exactly one of {', '.join(KINDS)}; found {len(kinds)}")
    kind = kinds[0]
    node = _node(data, kind)
    try:
        payload: Payload
        if kind == "gpus":
            payload = parse_gpus(data[kind], node=node)
        elif kind == "host":
            payload = parse_host(data[kind])
        elif kind == "ports":
            payload = parse_ports(data[kind])
        elif kind == "event":
            body = data[kind]
            payload = parse_log_event({**body, "ts": ts} if isinstance(body, dict) else body, kind)
        else:
            payload = parse_training(data[kind], max_ranks=max_ranks)
    except SampleError as exc:
        field = f"{kind}.{exc.field}" if exc.field and not exc.field.startswith(kind) else (exc.field or kind)
        raise ValueError(f"{field}: {exc.message}") from None
    return TraceRecord(lineno, float(ts), kind, payload, node)


def _node(data: dict[str, Any], kind: str) -> str | None:
    """A gpus or host line's ``node`` (None: the recording daemon's own); ignored on a training line,
    whose ranks name their hosts."""
    node = data.get("node")
    if node is None or kind == "training":
        return None
    if kind == "ports":
        raise ValueError("node: a ports line is the recording daemon's own (other nodes' ports are not recorded)")
    if not isinstance(node, str) or not node:
        got = "an empty string" if node == "" else type_name(node)
        raise ValueError(f"node: must be a hostname (a non-empty string), got {got}")
    return node


def bounded_lines(fh: IO[bytes], limit: int = MAX_LINE_BYTES) -> Iterator[bytes]:
    """The lines of a binary file, reading at most ``limit`` bytes of any one line.

    A longer line is yielded as its first ``limit + 1`` bytes (so the reader can
    report it) and the rest of it is skipped: one huge line cannot exhaust memory.
    """
    while True:
        line = fh.readline(limit + 1)
        if not line:
            return
        if len(line) > limit and not line.endswith(b"\n"):
            while True:  # drain the rest of the oversized line
                rest = fh.readline(limit)
                if not rest or rest.endswith(b"\n"):
                    break
        yield line


def read_trace(
    lines: Iterable[str | bytes], errors: list[TraceError], max_line_bytes: int = MAX_LINE_BYTES
) -> Iterator[TraceRecord]:
    """Yield the valid records of a trace; each bad line is appended to ``errors``.

    Pass a binary file through :func:`bounded_lines` so no line can be larger
    than ``MAX_LINE_BYTES``.
    """
    for lineno, raw in enumerate(lines, start=1):
        if isinstance(raw, bytes) and len(raw) > max_line_bytes:
            errors.append(TraceError(lineno, f"longer than {max_line_bytes} bytes"))
            continue
        try:
            # The fast path, ~3x json's speed: orjson reads a well-formed line (bytes or str) to the value
            # json reads. What it refuses — the NaN/Infinity a diverged loss is written with, a lone
            # surrogate, a number beyond a double, a blank line, bad UTF-8 — takes json's path below, which
            # also words the errors. One difference remains: an integer beyond 64 bits reads as a float;
            # every integer field's bound refuses it either way, only the error echoes it as a float.
            data = orjson.loads(raw)
        except orjson.JSONDecodeError:
            text = _text(raw, lineno, errors)
            if not text:
                continue
            try:
                data = _json_value(text)
            except ValueError as exc:
                errors.append(TraceError(lineno, str(exc)))
                continue
        try:
            yield _record(data, lineno)
        except ValueError as exc:
            errors.append(TraceError(lineno, str(exc)))


def _text(raw: str | bytes, lineno: int, errors: list[TraceError]) -> str:
    """The line as stripped text ("" for a blank line, or bad UTF-8: appended to ``errors``)."""
    if isinstance(raw, bytes):
        try:
            raw = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            errors.append(TraceError(lineno, f"not valid UTF-8 (byte {exc.start})"))
            return ""
    return raw.strip()


def _with_xids(gpu: GpuSample, codes: list[int] | None) -> GpuSample:
    return gpu if not codes else replace(gpu, xid_errors=tuple(codes))
