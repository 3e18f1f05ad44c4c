"""A GPU's links as NVML reads them: PCIe replays, the PCIe link's generation and width against their maximum,
NVLink error totals and the links that are down.

Each field is guarded on its own: an old driver, a GPU without NVLink or a call
the binding lacks gives no field (logged once by the session), never an error.
The NVLink totals come in one ``nvmlDeviceGetFieldValues`` call (DCGM's own
``*_COUNT_TOTAL`` fields: every link summed by the driver); the per-link state
costs one call per link the GPU has.
"""

from __future__ import annotations

from typing import Any

from ._nvml import NvmlSession

#: nvml.h field ids, used where a binding lacks the named constant: (constant, id, the sample field it feeds).
NVLINK_FIELDS: tuple[tuple[str, int, str], ...] = (
    ("NVML_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL", 38, "nvlink_crc_errors"),
    ("NVML_FI_DEV_NVLINK_CRC_DATA_ERROR_COUNT_TOTAL", 45, "nvlink_crc_errors"),
    ("NVML_FI_DEV_NVLINK_REPLAY_ERROR_COUNT_TOTAL", 52, "nvlink_replay_errors"),
    ("NVML_FI_DEV_NVLINK_RECOVERY_ERROR_COUNT_TOTAL", 59, "nvlink_recovery_errors"),
)
#: nvml.h's ``NVML_FI_DEV_NVLINK_LINK_COUNT``: how many NVLinks the GPU has.
LINK_COUNT_FIELD = ("NVML_FI_DEV_NVLINK_LINK_COUNT", 91)
#: ``nvmlDeviceGetNvLinkState``'s answer for an active link (``NVML_FEATURE_ENABLED``).
FEATURE_ENABLED = ("NVML_FEATURE_ENABLED", 1)
#: nvml.h's value types of a field value: an unsigned int (``uiVal``), an unsigned long long (``ullVal``).
VALUE_UINT, VALUE_ULONGLONG = 1, 3
#: The most NVLinks a GPU has (NVML_NVLINK_MAX_LINKS in 12.x drivers): a link count above it is not believed.
MAX_LINKS = 36


class LinkReader:
    """Reads one GPU's link fields a tick; the maximum generation and width (fixed by the GPU and its slot) once."""

    def __init__(self, session: NvmlSession) -> None:
        self._nvml = session
        c = session.constant
        self._fields = [(c(name, default), field) for name, default, field in NVLINK_FIELDS]
        self._link_count_id = c(*LINK_COUNT_FIELD)
        self._enabled = c(*FEATURE_ENABLED)
        self._maxima: dict[int, dict[str, int]] = {}

    def read(self, handle: Any, index: int) -> dict[str, int]:
        """The link fields of GPU ``index`` that NVML gives (a GPU lost mid-read raises the session's GpuLost)."""
        out = self._pcie(handle, index)
        out.update(self._nvlink(handle, index))
        return out

    def _get(self, fn: str, handle: Any, index: int, *args: Any) -> Any:
        return self._nvml.query(fn, handle, *args, gpu=index, field=fn.removeprefix("nvmlDeviceGet"))

    def _pcie(self, handle: Any, index: int) -> dict[str, int]:
        out: dict[str, int] = {}
        for fn, field in (
            ("nvmlDeviceGetPcieReplayCounter", "pcie_replay_errors"),
            ("nvmlDeviceGetCurrPcieLinkGeneration", "pcie_link_gen"),
            ("nvmlDeviceGetCurrPcieLinkWidth", "pcie_link_width"),
        ):
            value = self._get(fn, handle, index)
            if isinstance(value, int) and value >= 0:
                out[field] = value
        if index not in self._maxima:
            maxima = {
                field: value
                for fn, field in (
                    ("nvmlDeviceGetMaxPcieLinkGeneration", "pcie_link_gen_max"),
                    ("nvmlDeviceGetMaxPcieLinkWidth", "pcie_link_width_max"),
                )
                if isinstance(value := self._get(fn, handle, index), int) and value > 0
            }
            if len(maxima) == 2:  # both known: never asked again
                self._maxima[index] = maxima
            out.update(maxima)
        else:
            out.update(self._maxima[index])
        return out

    def _nvlink(self, handle: Any, index: int) -> dict[str, int]:
        ids = [self._link_count_id, *(field_id for field_id, _ in self._fields)]
        values = self._get("nvmlDeviceGetFieldValues", handle, index, ids)
        if values is None or len(values) != len(ids):
            return {}
        links = _value(values[0])
        if not links or links > MAX_LINKS:  # no NVLink on this GPU: nothing to report
            return {}
        out: dict[str, int] = {}
        for (_, field), value in zip(self._fields, values[1:], strict=True):
            count = _value(value)
            if count is not None:
                out[field] = out.get(field, 0) + count
        states = [self._get("nvmlDeviceGetNvLinkState", handle, index, link) for link in range(links)]
        if all(s is not None for s in states):
            out["nvlink_links_down"] = sum(1 for s in states if s != self._enabled)
        return out


def _value(field: Any) -> int | None:
    """A field value's integer (``uiVal`` or ``ullVal`` by its type), or None where NVML answered an error for it."""
    if getattr(field, "nvmlReturn", 1) != 0:
        return None
    name = "uiVal" if getattr(field, "valueType", VALUE_ULONGLONG) == VALUE_UINT else "ullVal"
    number = getattr(getattr(field, "value", None), name, None)
    return number if isinstance(number, int) and number >= 0 else None
