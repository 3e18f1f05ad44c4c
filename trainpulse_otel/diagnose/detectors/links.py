"""``link_degradation``: a GPU's PCIe or NVLink, or a host's InfiniBand/RoCE port, wearing before it fails.

The evidence is the hardware's own counters, judged as rates (a counter that
goes back was reset or its host rebooted: it starts again, no error), and the
link's trained state against its maximum: PCIe replays above DCGM's limit,
NVLink CRC errors at DCGM's rate, an InfiniBand port's symbol or receive errors
above NVSentinel's rate, any rise of ``link_downed`` or of buffer overruns
(critical: the link flapped or flow control broke), symbol errors past the
InfiniBand spec's 120 an hour (critical), an active port gone down, a
PCIe link trained narrower than it can, or at a lower generation while its GPU
is busy (an idle GPU lowers its PCIe generation to save power), NVLinks down.
A rate counts once it is past its limit on two readings in a row (one
reading's burst is noise); a state or a fatal rise counts at once.
"""

from __future__ import annotations

from collections import deque
from typing import Any

from ...samples import GpuSample, PortKey, PortSample, gpu_label
from ..spec import GPU, SignalSpec
from ..thresholds import CONVENTION, COUNT, PER_HOUR, PER_MINUTE, PER_SECOND, PERCENT, SECONDS, Knob, Thresholds
from ..tick import Tick
from ..types import CRITICAL, WARNING, Finding, Policy
from .base import BaseDetector

LINK_DEGRADATION = SignalSpec(
    "link_degradation",
    "PCIe, NVLink or InfiniBand errors rising, or a link trained below its maximum",
    GPU,
    0.06,
    "sync",
    predictive=True,
    policy=Policy(raise_evidence=2.0, min_observations=1, hold=0.75, clear_after_s=120.0, stale_after_s=300.0),
)
#: A state that holds (a downtrained link, NVLinks down, a port gone down) scores this: raised at once.
STATE_SCORE = 2.0
#: Counters whose every rise is critical (NVSentinel: fatal on any rise): the link flapped, flow control broke, the
#: local link's integrity errors passed their threshold, a connection was severed (its RNR retries ran out).
FATAL_PORT_COUNTERS = (
    "link_downed",
    "excessive_buffer_overrun_errors",
    "local_link_integrity_errors",
    "rnr_nak_retry_err",
)
#: The hour a per-hour rate is counted over, and how often its history keeps a reading.
HOUR_S, HOURLY_STEP_S = 3600.0, 60.0
#: Counters judged by rate (NVSentinel's degradation rules): (counter, the knob holding its limit, ``s`` — per
#: second between readings — or ``min`` — per minute over ``window_s``).
RATED_PORT_COUNTERS = (
    ("symbol_error", "ib_errors_per_s", "s"),
    ("port_rcv_errors", "ib_errors_per_s", "s"),
    ("port_xmit_discards", "xmit_discards_per_s", "s"),
    ("link_error_recovery", "recoveries_per_min", "min"),
    ("local_ack_timeout_err", "ack_timeouts_per_s", "s"),
)


class _Rate:
    """One cumulative counter's recent values, for its rate over a window; a value that goes back restarts it.
    ``every_s``: an unchanged value is kept at most this often (an hour's history at a reading a minute)."""

    __slots__ = ("every_s", "points")

    def __init__(self, every_s: float = 0.0) -> None:
        self.every_s = every_s
        self.points: deque[tuple[float, int]] = deque()

    def add(self, ts: float, value: int, window_s: float) -> int:
        """Add a reading; returns how much it rose since the one before (0 after a reset or at the first)."""
        rose = 0
        if self.points and value < self.points[-1][1]:
            self.points.clear()  # reset, reboot, driver reload: not an error
        elif self.points:
            rose = value - self.points[-1][1]
        if not rose and self.points and ts - self.points[-1][0] < self.every_s:
            return 0  # an unchanged value, read again too soon to keep
        self.points.append((ts, value))
        while len(self.points) > 2 and self.points[1][0] <= ts - window_s:
            self.points.popleft()  # the next one already reaches back to the window's start
        return rose

    def per_second(self, window_s: float, recent: bool = False) -> float | None:
        """The rate over the window — what rose within it over the whole window, so a counter read for a few
        seconds only (a daemon just started) is not a rate of a minute — or (``recent``) between the last two
        readings: a poll-to-poll rate."""
        if len(self.points) < 2:
            return None
        (t0, v0), (t1, v1) = self.points[-2 if recent else 0], self.points[-1]
        if t1 <= t0:
            return None
        return (v1 - v0) / (t1 - t0 if recent else max(t1 - t0, window_s))

    def risen(self) -> int:
        """How much the counter rose over the readings kept (0 with fewer than two)."""
        return self.points[-1][1] - self.points[0][1] if len(self.points) >= 2 else 0


class LinkDegradation(BaseDetector):
    """PCIe, NVLink and InfiniBand links wearing before they fail (see the module docstring); subject the GPU
    (``gpu_index``) or the port (``device``, ``port``) and its host; evidence each counter with its rate and the
    threshold it crossed, with the threshold's source."""

    name = "link_degradation"
    signals = (LINK_DEGRADATION,)
    knobs = (
        Knob("pcie_replays_per_min", 8.0, PER_MINUTE, CONVENTION, "DCGM's PCIe replay limit (its health watch)", 0),
        Knob("nvlink_crc_per_s", 100.0, PER_SECOND, CONVENTION, "DCGM's NVLink CRC error limit", 0),
        Knob(
            "ib_errors_per_s",
            10.0,
            PER_SECOND,
            CONVENTION,
            "NVSentinel's InfiniBand degradation rule: symbol_error or port_rcv_errors above this rate",
            0,
        ),
        Knob("xmit_discards_per_s", 100.0, PER_SECOND, CONVENTION, "NVSentinel's limit on port_xmit_discards", 0),
        Knob("recoveries_per_min", 5.0, PER_MINUTE, CONVENTION, "NVSentinel's limit on link_error_recovery", 0),
        Knob("ack_timeouts_per_s", 1.0, PER_SECOND, CONVENTION, "NVSentinel's limit on local_ack_timeout_err", 0),
        Knob(
            "symbol_errors_per_h",
            120.0,
            PER_HOUR,
            CONVENTION,
            "the InfiniBand spec's most symbol errors an hour (BER 1e-12): past it NVSentinel calls the link fatal",
            0,
        ),
        Knob(
            "nvlink_errors",
            1,
            COUNT,
            CONVENTION,
            "NVLink replay or recovery errors within the window: DCGM's NVLink error limit (any)",
            1,
        ),
        Knob("window_s", 60.0, SECONDS, CONVENTION, "per-minute rates are counted over this window (DCGM's)", 1),
        Knob("hold_s", 600.0, SECONDS, CONVENTION, "a link_downed or buffer-overrun rise stays critical this long", 0),
        Knob(
            "busy_percent",
            50.0,
            PERCENT,
            CONVENTION,
            "an idle GPU lowers its PCIe generation to save power: a lower generation counts only while busy",
            0,
            100,
        ),
        Knob(
            "min_links_down",
            1,
            COUNT,
            CONVENTION,
            "NVLinks down of those the GPU has: its peer traffic loses their bandwidth, and a link rarely comes back "
            "without a GPU reset",
            1,
        ),
    )

    def __init__(self, thresholds: Thresholds | None = None) -> None:
        super().__init__(thresholds)
        self._rates: dict[tuple[Any, str], _Rate] = {}
        self._past: set[tuple[Any, str]] = set()  # the rated counters past their limit at their last reading
        self._fatal: dict[PortKey, tuple[float, list[str]]] = {}  # when a fatal counter last rose, which
        self._active: set[PortKey] = set()  # ports seen up: one that goes down from there is a link lost

    def update(self, tick: Tick) -> list[Finding] | None:
        frame = tick.frame
        ports = frame.ports
        if not frame.gpus and not ports:
            return None
        host = tick.node.hostname
        out = [f for g in frame.gpus if (f := self._gpu(g, tick.ts, host)) is not None]
        out += [f for p in ports if (f := self._port(p, tick.ts, host)) is not None]
        return out

    def _rate(
        self, key: Any, counter: str, ts: float, value: int | None, recent: bool = False
    ) -> tuple[int, float | None]:
        """How much a counter rose since its last reading, and its rate: over the window (DCGM's per-minute PCIe
        replays), or poll to poll (``recent``: NVLink CRC and InfiniBand errors, as DCGM and NVSentinel poll them)."""
        if value is None:
            return 0, None
        rate = self._counter(key, counter)
        rose = rate.add(ts, value, self.thresholds.window_s)
        return rose, rate.per_second(self.thresholds.window_s, recent)

    def _counter(self, key: Any, counter: str, every_s: float = 0.0) -> _Rate:
        rate = self._rates.get((key, counter))
        if rate is None:
            rate = self._rates[(key, counter)] = _Rate(every_s)
        return rate

    def _per_hour(self, key: PortKey, counter: str, ts: float, value: int) -> float:
        """A port counter's rise over the last hour, counted over the whole hour (a reading a minute kept)."""
        hourly = self._counter(key, counter + "/h", HOURLY_STEP_S)
        hourly.add(ts, value, HOUR_S)
        return (hourly.per_second(HOUR_S) or 0.0) * HOUR_S

    def _twice(self, key: Any, counter: str, past: bool) -> bool:
        """Whether a counter's rate is past its limit at this reading and the one before: a burst between two
        readings, then quiet, is noise; a rate holds."""
        was = (key, counter) in self._past
        if past:
            self._past.add((key, counter))
        else:
            self._past.discard((key, counter))
        return past and was

    def _window_rise(self, key: Any, counters: tuple[str, ...], g: GpuSample, ts: float) -> int:
        """How much these counters rose together over the window (a reset starts one over)."""
        total = 0
        for counter in counters:
            if (value := getattr(g, counter)) is not None:
                rate = self._counter(key, counter)
                rate.add(ts, value, self.thresholds.window_s)
                total += rate.risen()
        return total

    def _gpu(self, g: GpuSample, ts: float, host: str | None) -> Finding | None:
        t, key = self.thresholds, g.key
        parts: list[str] = []
        evidence: dict[str, Any] = {}
        score = 0.0
        _, replays = self._rate(key, "pcie_replay_errors", ts, g.pcie_replay_errors)
        if self._twice(key, "pcie_replay_errors", replays is not None and replays * 60 > t.pcie_replays_per_min):
            per_min = (replays or 0.0) * 60
            parts.append(f"{per_min:.0f} PCIe replays/min (DCGM's limit {t.pcie_replays_per_min:g}/min)")
            evidence["pcie_replays_per_min"] = round(per_min, 2)
            score = max(score, per_min / t.pcie_replays_per_min)
        _, crc = self._rate(key, "nvlink_crc_errors", ts, g.nvlink_crc_errors, recent=True)
        if self._twice(key, "nvlink_crc_errors", crc is not None and crc >= t.nvlink_crc_per_s):
            parts.append(f"{crc:.0f} NVLink CRC errors/s (DCGM's limit {t.nvlink_crc_per_s:g}/s)")
            evidence["nvlink_crc_per_s"] = round(crc, 2)
            score = max(score, (crc or 0.0) / t.nvlink_crc_per_s)
        errors = self._window_rise(key, ("nvlink_replay_errors", "nvlink_recovery_errors"), g, ts)
        if errors >= t.nvlink_errors:
            parts.append(f"{errors} NVLink replay/recovery error(s) in {t.window_s:g} s (DCGM: any is an error)")
            evidence["nvlink_errors"] = errors
            score = max(score, STATE_SCORE)
        trained = _downtrained(g, t.busy_percent)
        if trained:
            parts.append(trained)
            evidence.update(_pcie_link(g))
            score = max(score, STATE_SCORE)
        if g.nvlink_links_down is not None and g.nvlink_links_down >= t.min_links_down:
            parts.append(f"{g.nvlink_links_down} NVLink(s) down")
            evidence["nvlink_links_down"] = g.nvlink_links_down
            score = max(score, STATE_SCORE)
        if not parts:
            return None
        subject: dict[str, Any] = {"gpu_index": g.index, "hostname": g.node or host}
        subject = {k: v for k, v in subject.items() if v is not None}
        message = f"{gpu_label(key)}'s link is degrading: " + "; ".join(parts)
        return Finding(LINK_DEGRADATION.name, score, WARNING, message, subject, {**evidence, "link": "gpu"})

    def _port(self, p: PortSample, ts: float, host: str | None) -> Finding | None:
        t, key = self.thresholds, p.key
        parts: list[str] = []
        evidence: dict[str, Any] = {}
        score, severity = 0.0, WARNING
        for counter, limit_knob, per in RATED_PORT_COUNTERS:
            _, rate = self._rate(key, counter, ts, p.counter(counter), recent=per == "s")
            limit = getattr(t, limit_knob)
            value = 0.0 if rate is None else rate * (60.0 if per == "min" else 1.0)
            if self._twice(key, counter, value > limit):
                parts.append(f"{counter} {value:.0f}/{per} (NVSentinel's limit {limit:g}/{per})")
                evidence[f"{counter}_per_{per}"] = round(value, 2)
                score = max(score, value / limit)
        risen = [c for c in FATAL_PORT_COUNTERS if self._rate(key, c, ts, p.counter(c))[0] > 0]
        symbols = p.counter("symbol_error")
        if symbols is not None and self._per_hour(key, "symbol_error", ts, symbols) > t.symbol_errors_per_h:
            risen.append(f"symbol_error past {t.symbol_errors_per_h:g}/h")
        if risen:
            self._fatal[key] = (ts, risen)
        fatal = self._fatal.get(key)
        if fatal is not None and ts - fatal[0] <= t.hold_s:
            said = "; ".join(w if " past " in w else f"{w} rose" for w in fatal[1])
            parts.append(f"{said} (fatal to NVSentinel)")
            evidence["rose"] = fatal[1]
            score, severity = max(score, STATE_SCORE), CRITICAL
        if p.state == "ACTIVE":
            self._active.add(key)
        elif p.state is not None and key in self._active:
            parts.append(f"the port went {p.state} ({p.phys_state or 'physical state unknown'})")
            score, severity = max(score, STATE_SCORE), CRITICAL
        if not parts:
            return None
        evidence.update(state=p.state, phys_state=p.phys_state, rate_gbps=p.rate_gbps, link="port")
        subject = {k: v for k, v in (("device", p.device), ("port", p.port), ("hostname", p.node or host)) if v}
        return Finding(LINK_DEGRADATION.name, score, severity, f"{p.label}: " + "; ".join(parts), subject, evidence)


def _downtrained(g: GpuSample, busy_percent: float) -> str | None:
    """How a GPU's PCIe link trained below its maximum, or None: a narrower width at any time, a lower
    generation only while the GPU is busy."""
    narrow = g.pcie_link_width is not None and g.pcie_link_width_max and g.pcie_link_width < g.pcie_link_width_max
    busy = (g.utilization_percent or 0.0) >= busy_percent
    slow = busy and g.pcie_link_gen is not None and g.pcie_link_gen_max and g.pcie_link_gen < g.pcie_link_gen_max
    if not (narrow or slow):
        return None
    now = f"Gen{g.pcie_link_gen} x{g.pcie_link_width}"
    return f"PCIe link trained at {now} of Gen{g.pcie_link_gen_max} x{g.pcie_link_width_max}"


def _pcie_link(g: GpuSample) -> dict[str, int | None]:
    return {
        "pcie_link_gen": g.pcie_link_gen,
        "pcie_link_gen_max": g.pcie_link_gen_max,
        "pcie_link_width": g.pcie_link_width,
        "pcie_link_width_max": g.pcie_link_width_max,
    }
