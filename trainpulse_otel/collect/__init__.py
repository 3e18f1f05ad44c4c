"""Collection: read the world (NVML, nvidia-smi, host, simulation) into samples."""

from .base import Collected, Collector

__all__ = ["Collected", "Collector"]
