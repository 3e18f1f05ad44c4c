"""A stand-in for ``pynvml`` with the parts of its API TrainPulse uses.

Errors are built the way the real binding builds them: ``NVMLError(value)``
returns the matching ``NVMLError_*`` subclass, and each subclass takes no
argument (``NVMLError_NotSupported()``). Functions check the constants they
are passed, so a collector that asks for the wrong sensor or clock fails here
as it would on a driver.

Use::

    fake = make_fake_pynvml([FakeGpu(), FakeGpu(unsupported={"nvmlDeviceGetPowerUsage"})])
    monkeypatch.setitem(sys.modules, "pynvml", fake)
"""

from __future__ import annotations

import string
import types
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, ClassVar

ERROR_CODES = {
    "NVML_ERROR_UNINITIALIZED": 1,
    "NVML_ERROR_INVALID_ARGUMENT": 2,
    "NVML_ERROR_NOT_SUPPORTED": 3,
    "NVML_ERROR_NO_PERMISSION": 4,
    "NVML_ERROR_DRIVER_NOT_LOADED": 9,
    "NVML_ERROR_LIBRARY_NOT_FOUND": 12,
    "NVML_ERROR_FUNCTION_NOT_FOUND": 13,
    "NVML_ERROR_TIMEOUT": 10,
    "NVML_ERROR_GPU_IS_LOST": 15,
    "NVML_ERROR_UNKNOWN": 999,
}
_STRINGS = {
    1: "Uninitialized",
    2: "Invalid Argument",
    3: "Not Supported",
    4: "Insufficient Permissions",
    9: "Driver Not Loaded",
    10: "Timeout",
    12: "NVML Shared Library Not Found",
    13: "Function Not Found",
    15: "GPU is lost",
    999: "Unknown Error",
}
CONSTANTS = {
    "NVML_SUCCESS": 0,
    "NVML_TEMPERATURE_GPU": 0,
    "NVML_CLOCK_GRAPHICS": 0,
    "NVML_CLOCK_SM": 1,
    "NVML_CLOCK_MEM": 2,
    "NVML_MEMORY_ERROR_TYPE_CORRECTED": 0,
    "NVML_MEMORY_ERROR_TYPE_UNCORRECTED": 1,
    "NVML_VOLATILE_ECC": 0,
    "NVML_AGGREGATE_ECC": 1,
    "nvmlEventTypeSingleBitEccError": 0x1,
    "nvmlEventTypeDoubleBitEccError": 0x2,
    "nvmlEventTypeXidCriticalError": 0x8,
    "NVML_FEATURE_DISABLED": 0,
    "NVML_FEATURE_ENABLED": 1,
    "NVML_VALUE_TYPE_UNSIGNED_INT": 1,
    "NVML_VALUE_TYPE_UNSIGNED_LONG_LONG": 3,
    "NVML_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL": 38,
    "NVML_FI_DEV_NVLINK_CRC_DATA_ERROR_COUNT_TOTAL": 45,
    "NVML_FI_DEV_NVLINK_REPLAY_ERROR_COUNT_TOTAL": 52,
    "NVML_FI_DEV_NVLINK_RECOVERY_ERROR_COUNT_TOTAL": 59,
    "NVML_FI_DEV_NVLINK_LINK_COUNT": 91,
}
#: The NVLink field ids (nvml.h) the fake answers, and the FakeGpu attribute each reads.
NVLINK_FIELD_IDS = {38: "nvlink_crc_flit", 45: "nvlink_crc_data", 52: "nvlink_replay", 59: "nvlink_recovery"}
REASON_BITS = {
    "GpuIdle": 0x1,
    "ApplicationsClocksSetting": 0x2,
    "SwPowerCap": 0x4,
    "HwSlowdown": 0x8,
    "SyncBoost": 0x10,
    "SwThermalSlowdown": 0x20,
    "HwThermalSlowdown": 0x40,
    "HwPowerBrakeSlowdown": 0x80,
    "DisplayClockSetting": 0x100,
}
EVENT_REASONS_FN = "nvmlDeviceGetCurrentClocksEventReasons"
THROTTLE_REASONS_FN = "nvmlDeviceGetCurrentClocksThrottleReasons"


@dataclass
class FakeGpu:
    """One GPU's readings; defaults are an H100 SXM under load.

    ``unsupported``: function names that raise NotSupported.
    ``errors``: function name -> error code raised instead of a value.
    ``lost_after``: the GPU answers this many calls, then every call raises
    GpuIsLost until ``lost`` is set back to False.
    ``ecc_corrected`` / ``ecc_uncorrected``: the volatile counts (aggregate: ``ecc_aggregate_extra`` more).
    ``remapped_rows``: what ``nvmlDeviceGetRemappedRows`` returns (corrected, uncorrected, pending, failure).
    ``pci_bus_id``: NVML's bus id, as the kernel log's ``Xid (PCI:…)`` names the GPU.
    ``pcie_*``: the replay counter and the link's generation and width, now and at most (an H100 SXM: Gen5 x16).
    ``nvlink_active``: one flag per NVLink the GPU has (18 on an H100 SXM; empty: no NVLink, its fields answer
    NotSupported); ``nvlink_*`` the error totals over its links.
    Queue XIDs with :func:`raise_xid`; ``events_unsupported`` makes registering its events fail.
    """

    uuid: str | bytes = "GPU-5c1a4f38-9b2e-4d7a-8f63-0e2b7c9d1a42"
    name: str | bytes = "NVIDIA H100 80GB HBM3"
    util_gpu: int = 97
    util_memory: int = 41
    memory_used: int = 71_303_168_000
    memory_total: int = 85_520_809_984
    temperature: int = 64
    power_mw: int = 612_345
    power_limit_mw: int = 700_000
    sm_clock: int = 1980
    max_sm_clock: int = 1980
    reasons: int = 0
    ecc_uncorrected: int = 0
    ecc_corrected: int = 0
    ecc_aggregate_extra: int = 0
    remapped_rows: tuple[int, int, int, int] = (0, 0, 0, 0)
    pci_bus_id: str = "00000000:18:00.0"
    pcie_replay: int = 0
    pcie_gen: int = 5
    pcie_gen_max: int = 5
    pcie_width: int = 16
    pcie_width_max: int = 16
    nvlink_active: tuple[bool, ...] = (True,) * 18
    nvlink_crc_flit: int = 0
    nvlink_crc_data: int = 0
    nvlink_replay: int = 0
    nvlink_recovery: int = 0
    events_unsupported: bool = False
    unsupported: set[str] = field(default_factory=set)
    errors: dict[str, int] = field(default_factory=dict)
    lost_after: int | None = None
    lost: bool = False
    calls: int = 0


@dataclass(frozen=True)
class FakeHandle:
    """What ``nvmlDeviceGetHandleByIndex`` returns: opaque to the caller."""

    index: int


def _error_classes(module: types.ModuleType) -> None:
    """NVMLError plus one subclass per code, named and built like pynvml's."""

    class NVMLError(Exception):
        _valClassMapping: ClassVar[dict[int, type]] = {}

        def __new__(typ, value):  # pynvml's own spelling
            if typ == NVMLError:
                typ = NVMLError._valClassMapping.get(value, typ)
            obj = Exception.__new__(typ)
            obj.value = value
            return obj

        def __str__(self) -> str:
            return _STRINGS.get(self.value, f"NVML Error with code {self.value}")

        def __eq__(self, other: object) -> bool:
            return self.value == getattr(other, "value", None)

        __hash__ = Exception.__hash__

    def gen_new(val: int) -> Callable[..., Any]:
        def new(typ, *args):
            return NVMLError.__new__(typ, val)

        return new

    module.NVMLError = NVMLError
    for err_name, err_val in ERROR_CODES.items():
        setattr(module, err_name, err_val)
        words = string.capwords(err_name.replace("NVML_ERROR_", ""), "_").replace("_", "")
        cls = type("NVMLError_" + words, (NVMLError,), {"__new__": gen_new(err_val)})
        setattr(module, cls.__name__, cls)
        NVMLError._valClassMapping[err_val] = cls


class _State:
    """The fake driver's state: initialised or not, the GPUs, and the event sets with their queued events."""

    def __init__(self, gpus: list[FakeGpu], init_error: int | None) -> None:
        self.gpus = gpus
        self.init_error = init_error
        self.initialized = 0
        self.shutdowns = 0
        self.event_sets: list[FakeEventSet] = []
        self.waits: list[int] = []  # the timeout (ms) of every nvmlEventSetWait call


@dataclass
class FakeEventSet:
    """An NVML event set: the GPUs registered on it and the events not yet waited for."""

    registered: dict[int, int] = field(default_factory=dict)  # GPU index -> event mask
    pending: list[types.SimpleNamespace] = field(default_factory=list)
    freed: bool = False


def raise_xid(module: types.ModuleType, gpu: int, code: int) -> None:
    """The driver reports XID ``code`` on GPU ``gpu``: every event set registered for XIDs on it gets an event."""
    for event_set in module.state.event_sets:
        if event_set.registered.get(gpu, 0) & module.nvmlEventTypeXidCriticalError:
            event_set.pending.append(
                types.SimpleNamespace(
                    device=FakeHandle(gpu), eventType=module.nvmlEventTypeXidCriticalError, eventData=code
                )
            )


def make_fake_pynvml(
    gpus: list[FakeGpu] | None = None,
    *,
    init_error: int | None = None,
    event_reasons_api: bool = True,
) -> types.ModuleType:
    """A fresh fake ``pynvml`` module.

    ``init_error``: an NVML error code ``nvmlInit`` raises (e.g. 12, library
    not found). ``event_reasons_api=False`` mimics an older binding that only
    has ``nvmlDeviceGetCurrentClocksThrottleReasons``.
    """
    module = types.ModuleType("pynvml")
    module.__dict__.update(CONSTANTS)
    for suffix, bit in REASON_BITS.items():
        setattr(module, "nvmlClocksThrottleReason" + suffix, bit)
        if event_reasons_api:
            setattr(module, "nvmlClocksEventReason" + suffix, bit)
    _error_classes(module)
    state = _State(list(gpus or []), init_error)
    module.state = state
    _install_functions(module, state, event_reasons_api)
    return module


def _install_functions(module: types.ModuleType, state: _State, event_reasons_api: bool) -> None:
    err = module.NVMLError

    def check_init() -> None:
        if not state.initialized:
            raise err(module.NVML_ERROR_UNINITIALIZED)

    def device(handle: Any, fn: str) -> FakeGpu:
        check_init()
        if not isinstance(handle, FakeHandle) or handle.index >= len(state.gpus):
            raise err(module.NVML_ERROR_INVALID_ARGUMENT)
        gpu = state.gpus[handle.index]
        gpu.calls += 1
        if gpu.lost_after is not None and gpu.calls > gpu.lost_after:
            gpu.lost, gpu.lost_after = True, None
        if gpu.lost:
            raise err(module.NVML_ERROR_GPU_IS_LOST)
        if fn in gpu.unsupported:
            raise err(module.NVML_ERROR_NOT_SUPPORTED)
        if fn in gpu.errors:
            raise err(gpu.errors[fn])
        return gpu

    def expect(value: Any, wanted: Any) -> None:
        if value != wanted:
            raise err(module.NVML_ERROR_INVALID_ARGUMENT)

    def nvmlInit() -> None:
        if state.init_error is not None:
            raise err(state.init_error)
        state.initialized += 1

    def nvmlShutdown() -> None:
        check_init()
        state.initialized -= 1
        state.shutdowns += 1

    def nvmlDeviceGetCount() -> int:
        check_init()
        return len(state.gpus)

    def nvmlDeviceGetHandleByIndex(index: int) -> FakeHandle:
        check_init()
        if not 0 <= index < len(state.gpus):
            raise err(module.NVML_ERROR_INVALID_ARGUMENT)
        return FakeHandle(index)

    def nvmlDeviceGetUUID(handle: FakeHandle) -> str | bytes:
        return device(handle, "nvmlDeviceGetUUID").uuid

    def nvmlDeviceGetName(handle: FakeHandle) -> str | bytes:
        return device(handle, "nvmlDeviceGetName").name

    def nvmlDeviceGetUtilizationRates(handle: FakeHandle) -> types.SimpleNamespace:
        g = device(handle, "nvmlDeviceGetUtilizationRates")
        return types.SimpleNamespace(gpu=g.util_gpu, memory=g.util_memory)

    def nvmlDeviceGetMemoryInfo(handle: FakeHandle) -> types.SimpleNamespace:
        g = device(handle, "nvmlDeviceGetMemoryInfo")
        free = g.memory_total - g.memory_used
        return types.SimpleNamespace(total=g.memory_total, free=free, used=g.memory_used)

    def nvmlDeviceGetTemperature(handle: FakeHandle, sensor: int) -> int:
        g = device(handle, "nvmlDeviceGetTemperature")
        expect(sensor, module.NVML_TEMPERATURE_GPU)
        return g.temperature

    def nvmlDeviceGetPowerUsage(handle: FakeHandle) -> int:
        return device(handle, "nvmlDeviceGetPowerUsage").power_mw

    def nvmlDeviceGetEnforcedPowerLimit(handle: FakeHandle) -> int:
        return device(handle, "nvmlDeviceGetEnforcedPowerLimit").power_limit_mw

    def nvmlDeviceGetClockInfo(handle: FakeHandle, clock: int) -> int:
        g = device(handle, "nvmlDeviceGetClockInfo")
        expect(clock, module.NVML_CLOCK_SM)
        return g.sm_clock

    def nvmlDeviceGetMaxClockInfo(handle: FakeHandle, clock: int) -> int:
        g = device(handle, "nvmlDeviceGetMaxClockInfo")
        expect(clock, module.NVML_CLOCK_SM)
        return g.max_sm_clock

    def nvmlDeviceGetCurrentClocksEventReasons(handle: FakeHandle) -> int:
        return device(handle, EVENT_REASONS_FN).reasons

    def nvmlDeviceGetCurrentClocksThrottleReasons(handle: FakeHandle) -> int:
        return device(handle, THROTTLE_REASONS_FN).reasons

    def nvmlDeviceGetTotalEccErrors(handle: FakeHandle, error_type: int, counter: int) -> int:
        g = device(handle, "nvmlDeviceGetTotalEccErrors")
        if error_type not in (module.NVML_MEMORY_ERROR_TYPE_CORRECTED, module.NVML_MEMORY_ERROR_TYPE_UNCORRECTED):
            raise err(module.NVML_ERROR_INVALID_ARGUMENT)
        if counter not in (module.NVML_VOLATILE_ECC, module.NVML_AGGREGATE_ECC):
            raise err(module.NVML_ERROR_INVALID_ARGUMENT)
        count = g.ecc_corrected if error_type == module.NVML_MEMORY_ERROR_TYPE_CORRECTED else g.ecc_uncorrected
        return count + (g.ecc_aggregate_extra if counter == module.NVML_AGGREGATE_ECC else 0)

    def nvmlDeviceGetRemappedRows(handle: FakeHandle) -> tuple[int, int, int, int]:
        return device(handle, "nvmlDeviceGetRemappedRows").remapped_rows

    def nvmlDeviceGetPcieReplayCounter(handle: FakeHandle) -> int:
        return device(handle, "nvmlDeviceGetPcieReplayCounter").pcie_replay

    def nvmlDeviceGetCurrPcieLinkGeneration(handle: FakeHandle) -> int:
        return device(handle, "nvmlDeviceGetCurrPcieLinkGeneration").pcie_gen

    def nvmlDeviceGetMaxPcieLinkGeneration(handle: FakeHandle) -> int:
        return device(handle, "nvmlDeviceGetMaxPcieLinkGeneration").pcie_gen_max

    def nvmlDeviceGetCurrPcieLinkWidth(handle: FakeHandle) -> int:
        return device(handle, "nvmlDeviceGetCurrPcieLinkWidth").pcie_width

    def nvmlDeviceGetMaxPcieLinkWidth(handle: FakeHandle) -> int:
        return device(handle, "nvmlDeviceGetMaxPcieLinkWidth").pcie_width_max

    def nvmlDeviceGetFieldValues(handle: FakeHandle, field_ids: list[int]) -> list[types.SimpleNamespace]:
        """One value per id, each with its own return code, as the real call fills its array."""
        g = device(handle, "nvmlDeviceGetFieldValues")
        out = []
        for field_id in field_ids:
            if field_id == module.NVML_FI_DEV_NVLINK_LINK_COUNT or field_id in NVLINK_FIELD_IDS:
                count = len(g.nvlink_active) if field_id == 91 else getattr(g, NVLINK_FIELD_IDS[field_id])
                code = 0 if g.nvlink_active else module.NVML_ERROR_NOT_SUPPORTED
                kind = 1 if field_id == 91 else 3
                value = types.SimpleNamespace(uiVal=count, ullVal=count) if code == 0 else types.SimpleNamespace()
                out.append(types.SimpleNamespace(fieldId=field_id, nvmlReturn=code, valueType=kind, value=value))
            else:
                out.append(types.SimpleNamespace(fieldId=field_id, nvmlReturn=module.NVML_ERROR_INVALID_ARGUMENT))
        return out

    def nvmlDeviceGetNvLinkState(handle: FakeHandle, link: int) -> int:
        g = device(handle, "nvmlDeviceGetNvLinkState")
        if not 0 <= link < len(g.nvlink_active):
            raise err(module.NVML_ERROR_INVALID_ARGUMENT if g.nvlink_active else module.NVML_ERROR_NOT_SUPPORTED)
        return module.NVML_FEATURE_ENABLED if g.nvlink_active[link] else module.NVML_FEATURE_DISABLED

    def nvmlDeviceGetIndex(handle: FakeHandle) -> int:
        check_init()
        return handle.index

    def nvmlDeviceGetPciInfo(handle: FakeHandle) -> types.SimpleNamespace:
        return types.SimpleNamespace(busId=device(handle, "nvmlDeviceGetPciInfo").pci_bus_id.encode())

    def nvmlEventSetCreate() -> FakeEventSet:
        check_init()
        event_set = FakeEventSet()
        state.event_sets.append(event_set)
        return event_set

    def nvmlDeviceRegisterEvents(handle: FakeHandle, event_types: int, event_set: FakeEventSet) -> None:
        g = device(handle, "nvmlDeviceRegisterEvents")
        if g.events_unsupported:
            raise err(module.NVML_ERROR_NOT_SUPPORTED)
        event_set.registered[handle.index] = event_set.registered.get(handle.index, 0) | event_types

    def nvmlEventSetWait_v2(event_set: FakeEventSet, timeout_ms: int) -> types.SimpleNamespace:
        check_init()
        state.waits.append(timeout_ms)
        if event_set.freed:
            raise err(module.NVML_ERROR_INVALID_ARGUMENT)
        if not event_set.pending:
            raise err(module.NVML_ERROR_TIMEOUT)  # the real call would block up to timeout_ms first
        return event_set.pending.pop(0)

    def nvmlEventSetFree(event_set: FakeEventSet) -> None:
        check_init()
        event_set.freed = True

    functions = dict(locals())
    if not event_reasons_api:
        del functions[EVENT_REASONS_FN]
    for name, fn in functions.items():
        if name.startswith("nvml"):
            setattr(module, name, fn)
