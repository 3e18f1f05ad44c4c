"""Pick the collectors for a ``-mode``.

``auto`` tries NVML, then nvidia-smi, then host-only, and says which it chose.
``none`` collects nothing (the daemon then only serves ingest). Hardware
modules are imported only when their mode is considered.
"""

from __future__ import annotations

import logging

from ..config import Settings
from .base import Collector

log = logging.getLogger(__name__)


def build_collectors(settings: Settings) -> tuple[str, list[Collector]]:
    """The resolved mode and its collectors."""
    mode = settings.mode
    if mode == "none":
        return "none", []
    if mode == "sim":
        from .sim import SimCollector

        return "sim", [SimCollector(settings.scenario, interval_s=settings.interval)]
    if mode == "auto":
        mode = _detect(settings)
    from .host import HostCollector

    gpu: list[Collector] = []
    if mode == "nvml":
        from .nvml import NvmlCollector

        gpu = [NvmlCollector()]
    elif mode == "nvidia-smi":
        from .smi import SmiCollector

        gpu = [SmiCollector(timeout=settings.smi_timeout)]
    return mode, [*gpu, HostCollector()]


def _detect(settings: Settings) -> str:
    from .nvml import NvmlCollector
    from .smi import SmiCollector

    if NvmlCollector.available():
        log.info("mode auto: using NVML")
        return "nvml"
    if SmiCollector.available(timeout=settings.smi_timeout):
        log.info("mode auto: NVML unavailable, using nvidia-smi")
        return "nvidia-smi"
    log.info("mode auto: no NVIDIA GPU tooling found, collecting host metrics only")
    return "host"
