"""The input pipeline: waiting for the data loader and for tokenization."""

from __future__ import annotations

from .base import Threshold
from .level import StepShareDetector


class DataloaderStarvation(StepShareDetector):
    """``dataloader_starvation``: the step waits for its next batch.

    Statistic: median of the last 5 reports of ``data_wait_ms / step_time_ms``.
    Warning at 10 % of the step, critical at 30 %; from 2 % when that is also
    3x the job's own baseline and 6 sigmas above it (a ramp caught early).
    """

    name = "dataloader"
    signal = "dataloader_starvation"
    field = "data_wait_ms"
    waits_for = "the data loader"
    threshold = Threshold(warning=0.10, critical=0.30, early=0.02)
    min_scale = 0.002


class TokenizerStall(StepShareDetector):
    """``tokenizer_stall``: the step waits for on-the-fly tokenization.

    Statistic: median of the last 5 reports of ``tokenizer_wait_ms / step_time_ms``;
    thresholds as for the data loader.
    """

    name = "tokenizer"
    signal = "tokenizer_stall"
    field = "tokenizer_wait_ms"
    waits_for = "tokenization"
    threshold = Threshold(warning=0.10, critical=0.30, early=0.02)
    min_scale = 0.002
