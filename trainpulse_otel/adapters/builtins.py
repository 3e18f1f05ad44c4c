"""TrainPulse's own framework adapters, listed in code; third parties come from ``trainpulse.adapters``."""

from __future__ import annotations

from . import deepspeed, generic, hf_trainer, lightning_metrics, megatron, pytorch, torchtitan
from .base import Adapter

#: By name: ``POST /v1/framework?name=NAME`` takes each of these names.
ADAPTERS: tuple[Adapter, ...] = (
    deepspeed.ADAPTER,
    generic.ADAPTER,
    hf_trainer.ADAPTER,
    lightning_metrics.ADAPTER,
    megatron.ADAPTER,
    pytorch.ADAPTER,
    torchtitan.ADAPTER,
)
