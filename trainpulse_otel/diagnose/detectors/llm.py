"""LLM efficiency: model FLOPs utilisation and sequence padding."""

from __future__ import annotations

from typing import Any

from ..spec import TRAINING, FactSpec, SignalSpec
from ..thresholds import CONVENTION, PHYSICS, SHARE, Knob
from ..tick import Tick
from .base import percent
from .level import LevelDetector

LOW_MFU = SignalSpec(
    "low_mfu", "the job achieves a small share of the GPUs' peak FLOP rate", TRAINING, 0.08, "compute", measured=True
)
#: The job's MFU as judged (the median of the last reports): what a waste's share is set against.
MFU = FactSpec(LOW_MFU.name, SHARE, "the job's model FLOPs utilisation, the median of its last reports")
#: The fact naming the MFU that counts as normal (the ``warning`` knob).
NORMAL_MFU = FactSpec("normal_mfu", SHARE, "the MFU a wasted share's removal must restore to explain it")
SEQUENCE_PADDING = SignalSpec(
    "sequence_padding", "much of every batch is padding", TRAINING, 0.06, "compute", measured=True
)


class LowMfu(LevelDetector):
    """``low_mfu``: the job achieves a small share of the GPUs' peak FLOP rate.

    Statistic: median of the last 5 reported ``mfu``. A physical bound, not a
    baseline: dense transformer training on current GPUs reaches 0.35–0.55, so
    below 0.20 is a warning and below 0.10 critical; the signal clears above
    0.27 (hysteresis). Works from the first sample: a job that never was
    efficient has no baseline to fall from. Why it is low (padding, idle GPUs,
    a pipeline bubble, slow kernels) is the root-cause stage's question.
    """

    name = "mfu"
    signals = (LOW_MFU,)
    knobs = (
        Knob(
            "warning",
            0.20,
            SHARE,
            PHYSICS,
            "dense transformer training on current GPUs reaches 0.35-0.55 MFU (PaLM, Megatron-LM reports); below "
            "0.20 something wastes the GPUs. Also the MFU a wasted share's removal must restore to explain it",
            0,
            1,
            at_least="critical",
        ),
        Knob("critical", 0.10, SHARE, PHYSICS, "a tenth of peak: the GPUs mostly wait or run slow kernels", 0, 1),
    )
    higher_is_worse = False
    provides = (MFU, NORMAL_MFU)

    def measure(self, tick: Tick) -> float | None:
        report = tick.report
        return None if report is None or report.mfu is None else report.mfu

    def describe(self, value: float, tick: Tick) -> tuple[str, dict[str, Any]]:
        report = tick.report or tick.training
        evidence: dict[str, Any] = {"mfu": round(value, 4)}
        if report is not None and report.tflops is not None:
            evidence["tflops_per_gpu"] = report.tflops
        return f"MFU is {value:.2f}: the GPUs deliver {percent(value)} of their peak FLOP rate", evidence

    def facts(self) -> dict[str, Any]:
        """The MFU, and the warning bound a wasted share's removal must lift it to for that share to explain it."""
        return {} if self.value is None else {self.signal: self.value, NORMAL_MFU.name: self.threshold.warning}


class SequencePadding(LevelDetector):
    """``sequence_padding``: much of every batch is padding.

    Statistic: median of the last 5 reports of ``1 - avg_seq_len / max_seq_len``.
    Warning at 25 % padding, critical at 50 %. Physical, from the first sample.
    """

    name = "padding"
    signals = (SEQUENCE_PADDING,)
    knobs = (
        Knob("warning", 0.25, SHARE, CONVENTION, "a quarter of the batch's tokens are pads: packing pays off", 0, 1),
        Knob(
            "critical", 0.50, SHARE, CONVENTION, "half of every batch is computed on nothing", 0, 1, at_least="warning"
        ),
    )

    def measure(self, tick: Tick) -> float | None:
        report = tick.report
        if report is None or report.avg_seq_len is None or not report.max_seq_len:
            return None
        return max(0.0, 1.0 - report.avg_seq_len / report.max_seq_len)

    def describe(self, value: float, tick: Tick) -> tuple[str, dict[str, Any]]:
        report = tick.report or tick.training
        evidence: dict[str, Any] = {"padding_ratio": round(value, 4)}
        if report is not None:
            evidence.update(avg_seq_len=report.avg_seq_len, max_seq_len=report.max_seq_len)
        return f"{percent(value)} of every batch is padding", evidence
