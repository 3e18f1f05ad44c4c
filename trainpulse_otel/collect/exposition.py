"""Prometheus text exposition from dcgm-exporter and node-exporter, read into TrainPulse's own samples.

Pure functions over the text of one scrape, parsed by the Prometheus client library's own parser:
:func:`gpus_from_dcgm` reads dcgm-exporter's ``DCGM_FI_DEV_*`` series into :class:`GpuSample` (one per ``gpu``
label, MiB as bytes), :func:`ports_from_node_exporter` node-exporter's ``node_infiniband_*`` series into
:class:`PortSample`. Unknown series are ignored; NaN, DCGM's "blank" sentinels and out-of-range values become
None, never an error. Text the parser rejects raises :class:`ScrapeError` (a ValueError), nothing else.

Nodes: a GPU's node is ``node``, unless the exposition's series carry more than one ``Hostname`` label value
(dcgm-exporters behind a Prometheus federation): then each GPU is keyed by (Hostname, gpu) and its node is its
Hostname. XIDs: dcgm-exporter's ``DCGM_FI_DEV_XID_ERRORS`` is a gauge of the *last* XID code, not a count, so
:func:`read_dcgm` returns it apart (``last_xid``) and :class:`XidGauge` turns successive scrapes into new XIDs.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any, NamedTuple

from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.samples import Sample

from ..samples import PORT_COUNTERS, GpuKey, GpuSample, PortSample
from ._nvml import NVML_H_REASON_BITS, decode_reasons

_MIB = 1 << 20

# How a DCGM value becomes a GpuSample value: its kind says what range it may have and what type it takes.
PERCENT = "percent"  # 0..100, float
REAL = "real"  # finite, >= 0, float (°C, W, MHz)
COUNT = "count"  # integral, >= 0, int (after scaling)
SUM = "sum"  # a COUNT added to the other series of the same field (NVLink CRC: flit + data)
FLAG = "flag"  # 0 or 1
MASK = "mask"  # an NVML clock-event bitmask, decoded to THROTTLE_REASONS names

#: DCGM field, as dcgm-exporter names its series (dcgm_fields.h, etc/default-counters.csv) → (GpuSample field, scale
#: to that field's unit, kind). When two series fill one field the first listed wins (enforced power limit before the
#: requested one; the current clock-event name before the deprecated throttle name), except SUM, which adds them.
#: Names starting ``_`` are not GpuSample fields: FB free/reserved make the total where FB_TOTAL is absent (DCGM's
#: total is used + free + reserved), and the last XID code goes to ``last_xid``.
DCGM_FIELDS: dict[str, tuple[str, float, str]] = {
    "DCGM_FI_DEV_GPU_UTIL": ("utilization_percent", 1, PERCENT),
    "DCGM_FI_DEV_MEM_COPY_UTIL": ("memory_utilization_percent", 1, PERCENT),
    "DCGM_FI_DEV_FB_USED": ("memory_used_bytes", _MIB, COUNT),
    "DCGM_FI_DEV_FB_TOTAL": ("memory_total_bytes", _MIB, COUNT),
    "DCGM_FI_DEV_FB_FREE": ("_fb_free", _MIB, COUNT),
    "DCGM_FI_DEV_FB_RESERVED": ("_fb_reserved", _MIB, COUNT),
    "DCGM_FI_DEV_GPU_TEMP": ("temperature_celsius", 1, REAL),
    "DCGM_FI_DEV_POWER_USAGE": ("power_watts", 1, REAL),
    "DCGM_FI_DEV_ENFORCED_POWER_LIMIT": ("power_limit_watts", 1, REAL),
    "DCGM_FI_DEV_POWER_MGMT_LIMIT": ("power_limit_watts", 1, REAL),
    "DCGM_FI_DEV_SM_CLOCK": ("sm_clock_mhz", 1, REAL),
    "DCGM_FI_DEV_MAX_SM_CLOCK": ("max_sm_clock_mhz", 1, REAL),
    "DCGM_FI_DEV_CLOCKS_EVENT_REASONS": ("throttle_reasons", 1, MASK),
    "DCGM_FI_DEV_CLOCK_THROTTLE_REASONS": ("throttle_reasons", 1, MASK),
    "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL": ("ecc_uncorrected_errors", 1, COUNT),
    "DCGM_FI_DEV_ECC_SBE_VOL_TOTAL": ("ecc_corrected_errors", 1, COUNT),
    "DCGM_FI_DEV_XID_ERRORS": ("_last_xid", 1, COUNT),
    "DCGM_FI_DEV_ROW_REMAP_PENDING": ("remapped_rows_pending", 1, FLAG),
    "DCGM_FI_DEV_ROW_REMAP_FAILURE": ("remapped_rows_failed", 1, FLAG),
    "DCGM_FI_DEV_PCIE_REPLAY_COUNTER": ("pcie_replay_errors", 1, COUNT),
    "DCGM_FI_DEV_PCIE_LINK_GEN": ("pcie_link_gen", 1, COUNT),
    "DCGM_FI_DEV_PCIE_MAX_LINK_GEN": ("pcie_link_gen_max", 1, COUNT),
    "DCGM_FI_DEV_PCIE_LINK_WIDTH": ("pcie_link_width", 1, COUNT),
    "DCGM_FI_DEV_PCIE_MAX_LINK_WIDTH": ("pcie_link_width_max", 1, COUNT),
    "DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL": ("nvlink_crc_errors", 1, SUM),
    "DCGM_FI_DEV_NVLINK_CRC_DATA_ERROR_COUNT_TOTAL": ("nvlink_crc_errors", 1, SUM),
    "DCGM_FI_DEV_NVLINK_REPLAY_ERROR_COUNT_TOTAL": ("nvlink_replay_errors", 1, COUNT),
    "DCGM_FI_DEV_NVLINK_RECOVERY_ERROR_COUNT_TOTAL": ("nvlink_recovery_errors", 1, COUNT),
}
#: Fields a MIG GPU reports per GPU instance (series with a ``GPU_I_ID`` label): one instance's value is not the
#: GPU's, so instance series are read only for the device-wide fields (clocks, power, temperature, errors).
PER_INSTANCE = frozenset(
    {
        "DCGM_FI_DEV_GPU_UTIL",
        "DCGM_FI_DEV_MEM_COPY_UTIL",
        "DCGM_FI_DEV_FB_USED",
        "DCGM_FI_DEV_FB_TOTAL",
        "DCGM_FI_DEV_FB_FREE",
        "DCGM_FI_DEV_FB_RESERVED",
    }
)
#: DCGM's "no value" sentinels (dcgm_structs.h), as dcgm-exporter's own isBlankValue lists them: DCGM_FP64_BLANK
#: (2**47) … +3, DCGM_INT64_BLANK (0x7ffffffffffffff0) … +3, which a float reads as one value above 2**47, and
#: DCGM_INT32_BLANK (0x7ffffff0) … +3. Older dcgm-exporters print them (``9223372036854775794`` is
#: DCGM_INT64_NOT_SUPPORTED); newer ones leave the series out. No mapped field reaches 2**47 (FB is in MiB), so
#: anything from DCGM_FP64_BLANK up is a sentinel.
DCGM_FP64_BLANK = 140737488355328.0
DCGM_INT32_BLANKS = frozenset(range(0x7FFFFFF0, 0x7FFFFFF4))

#: node-exporter's infiniband series (collector/infiniband_linux.go) → the PORT_COUNTERS key it counts; its names
#: differ from the sysfs file names (``port_xmit_discards`` is ``port_discards_transmitted_total``).
NODE_EXPORTER_COUNTERS: dict[str, str] = {
    "node_infiniband_symbol_error_total": "symbol_error",
    "node_infiniband_link_downed_total": "link_downed",
    "node_infiniband_link_error_recovery_total": "link_error_recovery",
    "node_infiniband_port_errors_received_total": "port_rcv_errors",
    "node_infiniband_port_discards_transmitted_total": "port_xmit_discards",
    "node_infiniband_excessive_buffer_overrun_errors_total": "excessive_buffer_overrun_errors",
    "node_infiniband_local_link_integrity_errors_total": "local_link_integrity_errors",
    "node_infiniband_port_receive_remote_physical_errors_total": "port_rcv_remote_physical_errors",
}
#: The logical port state by its IB spec number, as sysfs's ``state`` names it (the kernel's ib_port_state_to_str);
#: node-exporter's ``node_infiniband_state_id`` carries the number. 0 is "no change": unknown.
IB_PORT_STATES = {1: "DOWN", 2: "INIT", 3: "ARMED", 4: "ACTIVE", 5: "ACTIVE_DEFER"}
#: The physical port state by number, as sysfs's ``phys_state`` names it (the kernel's phys_state_to_str).
IB_PHYS_STATES = {
    1: "Sleep",
    2: "Polling",
    3: "Disabled",
    4: "PortConfigurationTraining",
    5: "LinkUp",
    6: "LinkErrorRecovery",
    7: "Phy Test",
}
#: What prometheus_client's parser appends to the samples of a counter whose name lacks it.
_COUNTER_SUFFIX = "_total"
_BITS_PER_BYTE = 8
_GIGA = 1e9


class ScrapeError(ValueError):
    """A target could not be read as an exposition: ``target`` names it, ``kind`` the failure (for log-once)."""

    def __init__(self, target: str, kind: str, problem: str) -> None:
        super().__init__(f"{target}: {problem}")
        self.target = target
        self.kind = kind


class DcgmReading(NamedTuple):
    """What one dcgm-exporter exposition says: its GPUs (``xid_errors`` unset), and the last XID code of each GPU
    that has a ``DCGM_FI_DEV_XID_ERRORS`` series, by :attr:`GpuSample.key` (0: none since the driver loaded)."""

    gpus: tuple[GpuSample, ...]
    last_xid: dict[GpuKey, int]


def parse_samples(text: str, target: str = "exposition") -> list[Sample]:
    """Every sample of a text exposition, by the Prometheus client library's parser; :class:`ScrapeError` if it
    rejects the text."""
    try:
        return [sample for family in text_string_to_metric_families(text) for sample in family.samples]
    except Exception as exc:  # the parser raises ValueError, IndexError, KeyError … on malformed lines
        raise ScrapeError(target, "parse", f"not a Prometheus text exposition ({type(exc).__name__}: {exc})") from exc


def gpus_from_dcgm(text: str, node: str | None = None, *, target: str = "exposition") -> tuple[GpuSample, ...]:
    """The GPUs of a dcgm-exporter exposition, ordered by (node, index); ``xid_errors`` unset (see :func:`read_dcgm`)."""
    return read_dcgm(parse_samples(text, target), node).gpus


def read_dcgm(samples: Iterable[Sample], node: str | None = None) -> DcgmReading:
    """The GPUs and last XID codes of a parsed dcgm-exporter exposition (the node rule: the module docstring)."""
    dcgm = [(_dcgm_field(s), s) for s in samples if _dcgm_field(s) in DCGM_FIELDS and _gpu_index(s) is not None]
    federated = len({s.labels["Hostname"] for _, s in dcgm if s.labels.get("Hostname")}) > 1
    raw: dict[GpuKey, dict[str, tuple[float, bool]]] = {}
    labels: dict[GpuKey, dict[str, str]] = {}
    for name, s in dcgm:
        instance = bool(s.labels.get("GPU_I_ID"))
        if instance and name in PER_INSTANCE:
            continue
        key = ((s.labels.get("Hostname") or node) if federated else node, _gpu_index(s))
        values = raw.setdefault(key, {})
        labels.setdefault(key, s.labels)
        if name not in values or (values[name][1] and not instance):  # the whole GPU's series beats an instance's
            values[name] = (s.value, instance)
    gpus, last_xid = [], {}
    for key in sorted(raw, key=lambda k: (k[0] or "", k[1])):
        fields = _fields({name: value for name, (value, _) in raw[key].items()})
        if "_last_xid" in fields:
            last_xid[key] = fields["_last_xid"]
        gpus.append(_gpu(key, fields, labels[key]))
    return DcgmReading(tuple(gpus), last_xid)


def ports_from_node_exporter(
    text: str, node: str | None = None, *, target: str = "exposition"
) -> tuple[PortSample, ...]:
    """The InfiniBand/RoCE ports of a node-exporter exposition, ordered by (device, port)."""
    return read_ports(parse_samples(text, target), node)


def read_ports(samples: Iterable[Sample], node: str | None = None) -> tuple[PortSample, ...]:
    """The ports of a parsed node-exporter exposition (``link_layer`` stays None: node-exporter does not expose it)."""
    ports: dict[tuple[str, int], dict[str, Any]] = {}
    for s in samples:
        device, port = s.labels.get("device"), _int_label(s.labels.get("port"))
        if not s.name.startswith("node_infiniband_") or not device or port is None or port < 1:
            continue
        _port_value(ports.setdefault((device, port), {}), s.name, s.value)
    return tuple(_port(device, port, ports[(device, port)], node) for device, port in sorted(ports))


def is_dcgm(samples: Iterable[Sample]) -> bool:
    """Whether an exposition is a dcgm-exporter's: it holds a ``DCGM_FI_*`` series."""
    return any(s.name.startswith("DCGM_FI_") for s in samples)


def is_node_exporter(samples: Iterable[Sample]) -> bool:
    """Whether an exposition is a node-exporter's: it holds a ``node_*`` series."""
    return any(s.name.startswith("node_") for s in samples)


class XidGauge:
    """Turns dcgm-exporter's last-XID gauge, scrape after scrape, into the XIDs new since the previous scrape.

    A GPU's code is new when it differs from the one the previous scrape showed and is not 0. The first scrape of a
    GPU sets the baseline (its code may be hours old: it is not reported again on every restart), and a code repeated
    between two scrapes (XID 79, then 79 again) cannot be told from no new XID: that is the gauge's limit.
    """

    def __init__(self) -> None:
        self._last: dict[GpuKey, int] = {}

    def new_codes(self, last_xid: Mapping[GpuKey, int]) -> dict[GpuKey, tuple[int, ...]]:
        """The new XID codes of each GPU in ``last_xid`` (an empty tuple: none), remembering these codes."""
        out: dict[GpuKey, tuple[int, ...]] = {}
        for key, code in last_xid.items():
            before = self._last.get(key)
            self._last[key] = code
            out[key] = (code,) if before is not None and code != before and code > 0 else ()
        return out


# --------------------------------------------------------------- values


def _dcgm_field(sample: Sample) -> str:
    """The DCGM field a sample is: the parser names a counter's samples ``<name>_total``
    (``DCGM_FI_DEV_PCIE_REPLAY_COUNTER_total``)."""
    return sample.name.removesuffix(_COUNTER_SUFFIX)


def _gpu_index(sample: Sample) -> int | None:
    index = _int_label(sample.labels.get("gpu"))
    return index if index is not None and index >= 0 else None


def _int_label(text: str | None) -> int | None:
    return int(text) if text is not None and text.isascii() and text.isdigit() else None


def _clean(number: float) -> float | None:
    """An exporter's value, or None when it is NaN, infinite or negative (no mapped series is ever negative)."""
    value = float(number)  # the parser gives ints for integral values
    return None if math.isnan(value) or math.isinf(value) or value < 0 else value


def _dcgm_clean(number: float) -> float | None:
    """A DCGM value, or None when :func:`_clean` refuses it or it is one of DCGM's blank sentinels."""
    value = _clean(number)
    if value is None or value >= DCGM_FP64_BLANK or (value.is_integer() and int(value) in DCGM_INT32_BLANKS):
        return None
    return value


def _convert(value: float, scale: float, kind: str) -> Any:
    """A DCGM value as its field's type, or None when it is out of its kind's range."""
    clean = _dcgm_clean(value)
    if clean is None or (kind == PERCENT and clean > 100) or (kind == FLAG and clean not in (0, 1)):
        return None
    if kind in (PERCENT, REAL):
        return float(clean)
    if not clean.is_integer():
        return None
    return decode_reasons(int(clean), NVML_H_REASON_BITS) if kind == MASK else int(clean * scale)


def _fields(values: Mapping[str, float]) -> dict[str, Any]:
    """One GPU's DCGM values → its field values, by :data:`DCGM_FIELDS` (first listed wins; SUM adds)."""
    out: dict[str, Any] = {}
    for name, (attr, scale, kind) in DCGM_FIELDS.items():
        value = _convert(values[name], scale, kind) if name in values else None
        if value is None:
            continue
        if kind == SUM:
            out[attr] = out.get(attr, 0) + value
        else:
            out.setdefault(attr, value)
    if "memory_total_bytes" not in out and "memory_used_bytes" in out and "_fb_free" in out:
        out["memory_total_bytes"] = out["memory_used_bytes"] + out["_fb_free"] + out.get("_fb_reserved", 0)
    return out


def _gpu(key: GpuKey, fields: Mapping[str, Any], labels: Mapping[str, str]) -> GpuSample:
    public = {attr: value for attr, value in fields.items() if not attr.startswith("_")}
    uuid = labels.get("UUID") or labels.get("uuid") or None
    return GpuSample(index=key[1], uuid=uuid, name=labels.get("modelName") or None, node=key[0], **public)


def _port_value(port: dict[str, Any], name: str, value: float) -> None:
    """Files one node-exporter series' value under the port's field or counter it is."""
    clean = _clean(value)
    if clean is None:
        return
    if name == "node_infiniband_rate_bytes_per_second":
        port["rate_gbps"] = clean * _BITS_PER_BYTE / _GIGA
    elif not clean.is_integer():
        return
    elif name in NODE_EXPORTER_COUNTERS:
        port.setdefault("counters", {})[NODE_EXPORTER_COUNTERS[name]] = int(clean)
    elif name == "node_infiniband_state_id":
        port["state"] = IB_PORT_STATES.get(int(clean))
    elif name == "node_infiniband_physical_state_id":
        port["phys_state"] = IB_PHYS_STATES.get(int(clean))


def _port(device: str, port: int, values: dict[str, Any], node: str | None) -> PortSample:
    counters = values.pop("counters", {})
    ordered = tuple((name, counters[name]) for name in PORT_COUNTERS if name in counters)
    return PortSample(device=device, port=port, counters=ordered, node=node, **values)
