"""Failures that give warning: a link wearing for minutes before its GPU fails, for ``trainpulse eval``.

Each precursor scenario moves a GPU's link counters for minutes (PCIe replays, NVLink CRC errors climbing), then
the GPU falls off the bus (XID 79) at :attr:`Precursor.fails_at_s`. The evaluation measures how long before the
failure the node's risk rose (``link_degradation`` on that GPU). Not in the fault catalogue: the answer is a lead
time, not a signal at the end. The climbs are shaped after the field's reports of links that went bad before a
failure (shared/research/reliability_anchors.md: the B200 study caught 2 of 10 XID failures before the XID); they
exercise the path from counter to risk, they are no estimate of how often a real failure gives warning.
"""

from __future__ import annotations

from dataclasses import dataclass

from .knobs import Effect
from .scenarios import SCENARIOS, Scenario

#: What the failure itself raises and is named by: the catalogue's GPU falling off the bus.
FAILURE = SCENARIOS["gpu_hardware_fault"]

#: When the climb begins, and how long after it the GPU fails.
ONSET_S, FAILS_AFTER_S = 90.0, 600.0


@dataclass(frozen=True, slots=True)
class Precursor:
    """A scenario whose failure a link's counters announce: the GPU that fails and when (seconds from the start)."""

    scenario: Scenario
    gpu_index: int
    fails_at_s: float


def _precursor(name: str, description: str, climb: Effect, gpu: int) -> Precursor:
    fails_at = ONSET_S + FAILS_AFTER_S
    scenario = Scenario(
        name=name,
        description=description,
        onset_s=ONSET_S,
        duration_s=fails_at + 120.0,
        expected_signals=frozenset(("link_degradation",)),
        allowed_signals=FAILURE.expected_signals | FAILURE.allowed_signals,
        expected_cause=FAILURE.expected_cause,
        expected_subject={"gpu_index": gpu},
        effects=(climb, Effect("gpu_lost", 1.0, gpus=(gpu,), onset_s=fails_at)),
    )
    return Precursor(scenario, gpu, fails_at)


_PRECURSORS = (
    _precursor(
        "pcie_replays_before_xid79",
        "GPU 4's PCIe link goes bad: its replays climb from none to ~40 a minute over 8 minutes, then the GPU falls "
        "off the bus (XID 79) 10 minutes after the climb began.",
        Effect("pcie_replay_rate", 40.0 / 60.0, gpus=(4,), ramp_s=480.0),
        gpu=4,
    ),
    _precursor(
        "nvlink_crc_before_xid79",
        "GPU 1's NVLinks degrade: CRC errors climb from none to ~400 a second over 5 minutes, then the GPU falls off "
        "the bus (XID 79) 10 minutes after the climb began.",
        Effect("nvlink_crc_rate", 400.0, gpus=(1,), ramp_s=300.0),
        gpu=1,
    ),
)
PRECURSORS: dict[str, Precursor] = {p.scenario.name: p for p in _PRECURSORS}
