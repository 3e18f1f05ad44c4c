"""NvmlCollector and the _nvml wrapper, against a fake pynvml."""

from __future__ import annotations

import ctypes.util
import logging
import sys

import pytest

from tests.fakes.fake_pynvml import (
    EVENT_REASONS_FN,
    THROTTLE_REASONS_FN,
    FakeGpu,
    make_fake_pynvml,
)
from trainpulse_otel.collect import _nvml
from trainpulse_otel.collect.base import Collected, Collector
from trainpulse_otel.collect.nvml import NvmlCollector
from trainpulse_otel.collect.sim.physics import HEALTHY_LINKS
from trainpulse_otel.samples import GpuSample

NVML_LOGGERS = ("trainpulse_otel.collect._nvml", "trainpulse_otel.collect.nvml")


@pytest.fixture
def install(monkeypatch):
    """Put a fake pynvml in sys.modules; returns the fake."""

    def _install(gpus=None, **kwargs):
        fake = make_fake_pynvml(gpus, **kwargs)
        monkeypatch.setitem(sys.modules, "pynvml", fake)
        return fake

    return _install


def nvml_records(caplog, text: str) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.name in NVML_LOGGERS and text in r.getMessage()]


def tick(collector: NvmlCollector, n: int = 1) -> list[Collected]:
    return [collector.collect(now=1_700_000_000.0 + i) for i in range(n)]


# ---------------------------------------------------------------- decoding


def test_every_field_is_read_with_contract_units(install):
    install([FakeGpu()])
    collector = NvmlCollector()
    assert isinstance(collector, Collector)

    (gpu,) = collector.collect(now=1.0).gpus

    assert gpu == GpuSample(
        index=0,
        uuid="GPU-5c1a4f38-9b2e-4d7a-8f63-0e2b7c9d1a42",
        name="NVIDIA H100 80GB HBM3",
        utilization_percent=97.0,
        memory_utilization_percent=41.0,
        memory_used_bytes=71_303_168_000,
        memory_total_bytes=85_520_809_984,
        temperature_celsius=64.0,
        power_watts=612.345,  # mW -> W
        power_limit_watts=700.0,
        sm_clock_mhz=1980.0,
        max_sm_clock_mhz=1980.0,
        throttle_reasons=(),
        ecc_uncorrected_errors=0,
        ecc_corrected_errors=0,
        xid_errors=(),
        remapped_rows_pending=0,
        remapped_rows_failed=0,
        **HEALTHY_LINKS,  # tests/collect/test_nvml_links.py reads each
    )


def test_gpus_come_out_in_index_order_with_their_own_values(install):
    install([FakeGpu(uuid=f"GPU-{i}", temperature=50 + i) for i in range(4)])
    gpus = NvmlCollector().collect(now=1.0).gpus
    assert [(g.index, g.uuid, g.temperature_celsius) for g in gpus] == [
        (0, "GPU-0", 50.0),
        (1, "GPU-1", 51.0),
        (2, "GPU-2", 52.0),
        (3, "GPU-3", 53.0),
    ]


def test_bytes_from_older_bindings_become_str(install):
    install([FakeGpu(uuid=b"GPU-abc", name=b"Tesla V100-SXM2-32GB")])
    (gpu,) = NvmlCollector().collect(now=1.0).gpus
    assert (gpu.uuid, gpu.name) == ("GPU-abc", "Tesla V100-SXM2-32GB")


@pytest.mark.parametrize(
    ("mask", "reasons"),
    [
        (0x01, ("gpu_idle",)),
        (0x04, ("sw_power_cap",)),
        (0x08, ("hw_slowdown",)),
        (0x20, ("sw_thermal",)),
        (0x40, ("hw_thermal",)),
        (0x80, ("hw_power_brake",)),
        (0x48, ("hw_slowdown", "hw_thermal")),
        # applications clocks, sync boost and display clocks have no contract name
        (0x02 | 0x10 | 0x100, ()),
        (0x1FF, ("gpu_idle", "sw_power_cap", "hw_slowdown", "sw_thermal", "hw_thermal", "hw_power_brake")),
    ],
)
def test_throttle_bits_decode_to_contract_names(install, mask, reasons):
    install([FakeGpu(reasons=mask)])
    (gpu,) = NvmlCollector().collect(now=1.0).gpus
    assert gpu.throttle_reasons == reasons


def test_older_binding_without_clock_events_uses_throttle_reasons(install, caplog):
    install([FakeGpu(reasons=0x04)], event_reasons_api=False)
    caplog.set_level(logging.INFO)
    collector = NvmlCollector()
    results = tick(collector, 3)
    assert all(r.gpus[0].throttle_reasons == ("sw_power_cap",) for r in results)
    assert len(nvml_records(caplog, EVENT_REASONS_FN)) == 1


def test_older_driver_without_clock_events_function_falls_back(install):
    fake = install([FakeGpu(reasons=0x20, errors={EVENT_REASONS_FN: 13})])  # FunctionNotFound
    (gpu,) = NvmlCollector().collect(now=1.0).gpus
    assert gpu.throttle_reasons == ("sw_thermal",)
    assert fake.state.gpus[0].calls > 0


def test_reasons_unknown_when_neither_call_works(install):
    install([FakeGpu(unsupported={EVENT_REASONS_FN, THROTTLE_REASONS_FN})])
    (gpu,) = NvmlCollector().collect(now=1.0).gpus
    assert gpu.throttle_reasons is None
    assert gpu.utilization_percent == 97.0


# ------------------------------------------------------- missing fields


def test_unsupported_field_is_none_and_logged_once(install, caplog):
    install([FakeGpu(unsupported={"nvmlDeviceGetPowerUsage", "nvmlDeviceGetTotalEccErrors"})])
    caplog.set_level(logging.INFO)
    collector = NvmlCollector()

    results = tick(collector, 5)

    for result in results:
        (gpu,) = result.gpus
        assert gpu.power_watts is None
        assert gpu.ecc_uncorrected_errors is None
        assert gpu.power_limit_watts == 700.0
    power_logs = nvml_records(caplog, "GPU 0 power unavailable")
    ecc_logs = nvml_records(caplog, "GPU 0 ecc_uncorrected unavailable")
    assert len(power_logs) == 1 and len(ecc_logs) == 1
    assert "Not Supported" in power_logs[0].getMessage()
    assert power_logs[0].levelno == logging.INFO


def test_same_field_unsupported_on_two_gpus_logs_once_per_gpu(install, caplog):
    install([FakeGpu(unsupported={"nvmlDeviceGetTemperature"}) for _ in range(2)])
    caplog.set_level(logging.INFO)
    results = tick(NvmlCollector(), 3)
    assert all(g.temperature_celsius is None for r in results for g in r.gpus)
    assert len(nvml_records(caplog, "temperature unavailable")) == 2


def test_unexpected_error_is_a_warning_and_the_field_is_none(install, caplog):
    install([FakeGpu(errors={"nvmlDeviceGetMemoryInfo": 999})])  # Unknown Error
    caplog.set_level(logging.INFO)
    results = tick(NvmlCollector(), 2)
    gpu = results[-1].gpus[0]
    assert gpu.memory_used_bytes is None and gpu.memory_total_bytes is None
    assert gpu.utilization_percent == 97.0
    (record,) = nvml_records(caplog, "memory unavailable")
    assert record.levelno == logging.WARNING


# ------------------------------------------------------- no library


@pytest.mark.parametrize("code", [12, 9])  # LibraryNotFound, DriverNotLoaded
def test_no_library_or_driver_is_a_state_not_an_exception(install, caplog, code):
    install([FakeGpu()], init_error=code)
    caplog.set_level(logging.INFO)

    assert NvmlCollector.available() is False
    collector = NvmlCollector()
    assert [r.gpus for r in tick(collector, 3)] == [(), (), ()]
    collector.close()
    assert len(nvml_records(caplog, "NVML unavailable")) == 1


def test_pynvml_not_installed(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", None)  # makes `import pynvml` fail
    assert NvmlCollector.available() is False
    assert NvmlCollector().collect(now=1.0).gpus == ()
    assert _nvml.init() is False


@pytest.mark.skipif(ctypes.util.find_library("nvidia-ml") is not None, reason="this machine has NVML")
def test_real_pynvml_without_a_driver_says_unavailable(monkeypatch):
    monkeypatch.delitem(sys.modules, "pynvml", raising=False)
    assert NvmlCollector.available() is False


def test_available_needs_a_gpu_and_shuts_nvml_down(install):
    fake = install([FakeGpu(), FakeGpu()])
    assert NvmlCollector.available() is True
    assert fake.state.initialized == 0 and fake.state.shutdowns == 1

    install([])
    assert NvmlCollector.available() is False


def test_close_shuts_nvml_down_once(install):
    fake = install([FakeGpu()])
    collector = NvmlCollector()
    assert collector.gpu_count == 1
    collector.close()
    collector.close()
    assert fake.state.initialized == 0 and fake.state.shutdowns == 1
    assert collector.collect(now=2.0).gpus == ()


# ------------------------------------------------------- lost GPU


def test_lost_gpu_is_dropped_others_flow_and_it_is_logged_once(install, caplog):
    # GPU 1 answers the first tick (its call count then) and is lost from the second on.
    fake = install([FakeGpu(uuid="GPU-0"), FakeGpu(uuid="GPU-1"), FakeGpu(uuid="GPU-2")])
    caplog.set_level(logging.INFO)
    collector = NvmlCollector()
    first = tick(collector, 1)
    fake.state.gpus[1].lost_after = fake.state.gpus[1].calls

    indices = [[g.index for g in r.gpus] for r in first + tick(collector, 4)]

    assert indices[0] == [0, 1, 2]
    assert indices[1:] == [[0, 2]] * 4
    (lost,) = nvml_records(caplog, "is lost")
    assert lost.levelno == logging.WARNING and "GPU 1 (GPU-1)" in lost.getMessage()

    fake.state.gpus[1].lost = False
    indices = [[g.index for g in r.gpus] for r in tick(collector, 3)]
    assert indices == [[0, 1, 2]] * 3
    assert len(nvml_records(caplog, "answers again")) == 1

    fake.state.gpus[1].lost = True
    tick(collector, 2)
    assert len(nvml_records(caplog, "is lost")) == 2  # a new episode, logged again


def test_lost_gpu_costs_one_call_per_tick(install):
    fake = install([FakeGpu(lost=True)])
    collector = NvmlCollector()
    tick(collector, 1)  # identity unknown: UUID is the call that finds it lost
    before = fake.state.gpus[0].calls
    tick(collector, 4)
    assert fake.state.gpus[0].calls - before == 4


def test_lost_gpu_without_gpu_context_maps_to_default(install):
    install([FakeGpu(lost=True)])
    session = _nvml.NvmlSession()
    assert session.init()
    handle = session.query("nvmlDeviceGetHandleByIndex", 0)
    assert session.query("nvmlDeviceGetUUID", handle, default="?") == "?"
    with pytest.raises(_nvml.GpuLost):
        session.query("nvmlDeviceGetUUID", handle, gpu=0)
    session.shutdown()


# ------------------------------------------------------- the wrapper


def test_query_before_init_and_unknown_function_give_default(install, caplog):
    install([FakeGpu()])
    caplog.set_level(logging.INFO)
    session = _nvml.NvmlSession()
    assert session.query("nvmlDeviceGetCount", default=-1) == -1
    assert session.init() and session.init()  # idempotent
    assert session.query("nvmlDeviceGetCount") == 1
    for _ in range(3):
        assert session.query("nvmlDeviceGetNoSuchThing", default="x") == "x"
    assert len(nvml_records(caplog, "nvmlDeviceGetNoSuchThing")) == 1
    session.shutdown()
    assert session.query("nvmlDeviceGetCount", default=-1) == -1


@pytest.mark.parametrize("code", [3, 4, 15, 999])  # NotSupported, NoPermission, GpuIsLost, Unknown
def test_module_query_maps_errors_to_default(install, code):
    install([FakeGpu(errors={"nvmlDeviceGetPowerUsage": code})])
    try:
        assert _nvml.init()
        handle = _nvml.query("nvmlDeviceGetHandleByIndex", 0)
        assert _nvml.query("nvmlDeviceGetPowerUsage", handle, default=0) == 0
        assert _nvml.query("nvmlDeviceGetEnforcedPowerLimit", handle) == 700_000
    finally:
        _nvml.shutdown()


def test_fake_errors_are_built_like_pynvml(install):
    fake = install()
    err = fake.NVMLError(fake.NVML_ERROR_NOT_SUPPORTED)
    assert type(err) is fake.NVMLError_NotSupported
    assert isinstance(fake.NVMLError_GpuIsLost(), fake.NVMLError)
    assert fake.NVMLError_GpuIsLost().value == 15
    assert str(fake.NVMLError(12)) == "NVML Shared Library Not Found"


def test_reason_bits_match_nvml_h_with_or_without_pynvml(install, monkeypatch):
    install([])
    expected = {
        "gpu_idle": 1,
        "sw_power_cap": 4,
        "hw_slowdown": 8,
        "sw_thermal": 32,
        "hw_thermal": 64,
        "hw_power_brake": 128,
    }
    assert _nvml.reason_bits() == expected
    monkeypatch.setitem(sys.modules, "pynvml", None)
    assert _nvml.reason_bits() == expected
    assert _nvml.decode_reasons(0x84) == ("sw_power_cap", "hw_power_brake")
