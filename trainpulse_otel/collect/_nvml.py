"""The one module that touches NVML (``pynvml``, from ``nvidia-ml-py``).

Everything else asks through :class:`NvmlSession`, so that a host without the
library, without a driver or without a GPU is a normal state: ``init()`` answers
``False``, ``query()`` answers a default, and each distinct problem is logged
once rather than every tick. ``pynvml`` is imported inside functions, so
importing TrainPulse never needs it.

A lost GPU is the one error that is not a missing field: with ``gpu=`` given,
:meth:`NvmlSession.query` raises :class:`GpuLost` so the caller can drop the
whole GPU for that tick instead of reporting a sample full of holes.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from types import ModuleType
from typing import Any

from ..samples import THROTTLE_REASONS
from ._once import LogOnce

log = logging.getLogger(__name__)

#: Contract reason -> (suffix of pynvml's ``nvmlClocksEventReason*`` /
#: ``nvmlClocksThrottleReason*`` constant, its bit in nvml.h). The bit is the
#: fallback when pynvml is absent (nvidia-smi prints the same mask in hex).
_REASON_CONSTANTS: dict[str, tuple[str, int]] = {
    "gpu_idle": ("GpuIdle", 0x1),
    "sw_power_cap": ("SwPowerCap", 0x4),
    "hw_slowdown": ("HwSlowdown", 0x8),
    "sw_thermal": ("SwThermalSlowdown", 0x20),
    "hw_thermal": ("HwThermalSlowdown", 0x40),
    "hw_power_brake": ("HwPowerBrakeSlowdown", 0x80),
}

#: The same bits straight from nvml.h, for callers that must not load pynvml.
NVML_H_REASON_BITS: dict[str, int] = {r: bit for r, (_, bit) in _REASON_CONSTANTS.items()}


class GpuLost(Exception):
    """NVML says this GPU fell off the bus (``NVMLError_GpuIsLost``)."""

    def __init__(self, gpu: int) -> None:
        super().__init__(f"GPU {gpu} is lost")
        self.gpu = gpu


def _import_pynvml() -> ModuleType | None:
    """The pynvml module, or None when the binding is not installed."""
    try:
        import pynvml
    except ImportError:
        return None
    return pynvml


def _error_name(exc: BaseException) -> str:
    """``NVMLError_NotSupported`` and friends: a stable key for log-once."""
    return type(exc).__name__


def decode(value: Any) -> Any:
    """Older bindings return ``bytes`` for names and UUIDs; callers want ``str``."""
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return value


def reason_bits(lib: ModuleType | None = None) -> dict[str, int]:
    """Contract reason name -> bit, from pynvml's constants where it has them."""
    lib = lib if lib is not None else _import_pynvml()
    bits = {}
    for reason, (suffix, fallback) in _REASON_CONSTANTS.items():
        value = getattr(lib, "nvmlClocksEventReason" + suffix, None)
        if value is None:
            value = getattr(lib, "nvmlClocksThrottleReason" + suffix, fallback)
        bits[reason] = int(value)
    return bits


def decode_reasons(mask: int, bits: dict[str, int] | None = None) -> tuple[str, ...]:
    """The contract names of the bits set in ``mask``, in contract order.

    Bits TrainPulse has no name for (applications clocks, sync boost, display
    clocks) are left out: they are settings, not faults.
    """
    bits = bits if bits is not None else reason_bits()
    return tuple(r for r in THROTTLE_REASONS if mask & bits[r])


class NvmlSession:
    """One NVML init/shutdown pair, with log-once bookkeeping of its own.

    ``probe=True`` is for a quick "is NVML there?" check: its init failure is
    logged at DEBUG, leaving the one INFO line to the session that collects.
    """

    def __init__(self, probe: bool = False) -> None:
        self._lib: ModuleType | None = None
        self._log_once = LogOnce(log)
        self._init_level = logging.DEBUG if probe else logging.INFO

    @property
    def active(self) -> bool:
        """True between a successful ``init()`` and ``shutdown()``."""
        return self._lib is not None

    def init(self) -> bool:
        """Start NVML; False (logged once) when the library or driver is not there."""
        if self._lib is not None:
            return True
        lib = _import_pynvml()
        if lib is None:
            self._log_once(("init", "ImportError"), self._init_level, "pynvml is not installed")
            return False
        try:
            lib.nvmlInit()
        except (lib.NVMLError, OSError) as exc:
            self._log_once(("init", _error_name(exc)), self._init_level, "NVML unavailable: %s", exc)
            return False
        self._lib = lib
        return True

    def shutdown(self) -> None:
        """Stop NVML; safe to call twice or without a successful init."""
        lib, self._lib = self._lib, None
        if lib is None:
            return
        try:
            lib.nvmlShutdown()
        except lib.NVMLError as exc:
            log.debug("nvmlShutdown failed: %s", exc)

    def constant(self, name: str, default: Any = None) -> Any:
        """A pynvml constant by name (``NVML_CLOCK_SM``), or ``default``."""
        return getattr(self._lib, name, default)

    def reason_bits(self) -> dict[str, int]:
        """Contract reason name -> bit, from this session's pynvml."""
        return reason_bits(self._lib)

    def query(
        self,
        fn: str,
        *args: Any,
        default: Any = None,
        gpu: int | None = None,
        field: str | None = None,
    ) -> Any:
        """Call ``pynvml.<fn>(*args)``; on an NVML error, log once and return ``default``.

        ``gpu`` and ``field`` only shape the log-once key and message; with
        ``gpu`` given, a lost GPU raises :class:`GpuLost` instead.
        """
        func: Callable[..., Any] | None = getattr(self._lib, fn, None)
        if func is None:
            self._log_missing(fn)
            return default
        try:
            return decode(func(*args))
        except self._lib.NVMLError as exc:  # type: ignore[union-attr]
            if gpu is not None and isinstance(exc, self._lib.NVMLError_GpuIsLost):  # type: ignore[union-attr]
                raise GpuLost(gpu) from exc
            self._log_error(exc, gpu, field or fn)
            return default

    def next_event(self, event_set: Any) -> Any:
        """The next pending event of ``event_set`` without waiting (0 ms), or None when there is none.

        ``nvmlEventSetWait_v2`` with a zero timeout answers at once: an event,
        or ``NVMLError_Timeout`` for "none pending", which is the normal case
        and is not logged. Any other error is logged once and ends the drain.
        """
        wait: Callable[..., Any] | None = getattr(self._lib, "nvmlEventSetWait_v2", None) or getattr(
            self._lib, "nvmlEventSetWait", None
        )
        if wait is None:
            self._log_missing("nvmlEventSetWait_v2")
            return None
        try:
            return wait(event_set, 0)
        except self._lib.NVMLError as exc:  # type: ignore[union-attr]
            if _error_name(exc) != "NVMLError_Timeout":
                self._log_error(exc, None, "XID events")
            return None

    def _log_missing(self, fn: str) -> None:
        if self._lib is None:
            return
        self._log_once(("missing", fn), logging.INFO, "this pynvml has no %s; skipping it", fn)

    def _log_error(self, exc: BaseException, gpu: int | None, field: str) -> None:
        expected = ("NVMLError_NotSupported", "NVMLError_NoPermission", "NVMLError_FunctionNotFound")
        level = logging.INFO if _error_name(exc) in expected else logging.WARNING
        where = f"GPU {gpu} " if gpu is not None else ""
        key = (gpu, field, _error_name(exc))
        self._log_once(key, level, "%s%s unavailable (%s); reporting it as unknown", where, field, exc)


_default = NvmlSession()


def init() -> bool:
    """Start NVML in the module-wide session; False when it is not there."""
    return _default.init()


def query(fn: str, *args: Any, default: Any = None) -> Any:
    """Call an NVML function in the module-wide session; errors give ``default``."""
    return _default.query(fn, *args, default=default)


def shutdown() -> None:
    """Stop the module-wide session."""
    _default.shutdown()
