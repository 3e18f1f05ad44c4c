"""The diagnostic pipeline: window → detectors → correlation → health → root causes.

Pure: it reads frames and returns findings. The clock is the frame timestamp,
so a replayed trace gives the same timeline every time.
"""

from __future__ import annotations

from dataclasses import dataclass

from .types import Diagnosis, Transition
from .window import Window


@dataclass(frozen=True)
class PipelineResult:
    """One update's outcome: the diagnosis now and what changed since the last one."""

    diagnosis: Diagnosis
    transitions: tuple[Transition, ...] = ()
    top_cause_changed: bool = False


class DiagnosticPipeline:
    """Turns the window into a Diagnosis after each new frame."""

    def __init__(self) -> None:
        self._diagnosis = Diagnosis()

    @property
    def diagnosis(self) -> Diagnosis:
        """The latest diagnosis (healthy before the first frame)."""
        return self._diagnosis

    def update(self, window: Window) -> PipelineResult:
        """Diagnose the window after its newest frame was appended."""
        latest = window.latest
        if latest is None:
            return PipelineResult(self._diagnosis)
        self._diagnosis = Diagnosis(ts=latest.ts)
        return PipelineResult(self._diagnosis)
