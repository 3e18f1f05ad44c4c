"""The NVML name of one GPU: what the peak-FLOP/s table is looked up by when a process knows only its index."""

from __future__ import annotations

from ._nvml import NvmlSession


def detect_gpu_name(index: int) -> str | None:
    """The NVML name of GPU ``index`` (a training process's ``LOCAL_RANK``), or None without NVML."""
    session = NvmlSession(probe=True)
    if not session.init():
        return None
    try:
        handle = session.query("nvmlDeviceGetHandleByIndex", index)
        return session.query("nvmlDeviceGetName", handle) if handle is not None else None
    finally:
        session.shutdown()
