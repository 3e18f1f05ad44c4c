"""A GPU's PCIe and NVLink fields from NVML (the fake binding answers as nvml.h documents each call)."""

from __future__ import annotations

import sys

import pytest

from tests.fakes.fake_pynvml import FakeGpu, make_fake_pynvml
from trainpulse_otel.collect.nvml import NvmlCollector

LINK_FIELDS = (
    "pcie_replay_errors",
    "pcie_link_gen",
    "pcie_link_gen_max",
    "pcie_link_width",
    "pcie_link_width_max",
    "nvlink_crc_errors",
    "nvlink_replay_errors",
    "nvlink_recovery_errors",
    "nvlink_links_down",
)


@pytest.fixture
def collect(monkeypatch):
    def _collect(*gpus: FakeGpu, binding=None):
        fake = binding or make_fake_pynvml(list(gpus))
        monkeypatch.setitem(sys.modules, "pynvml", fake)
        collector = NvmlCollector()
        try:
            return collector.collect(now=1.0).gpus, fake
        finally:
            collector.close()

    return _collect


def links(gpu) -> dict[str, int | None]:
    return {name: getattr(gpu, name) for name in LINK_FIELDS}


def test_an_h100_sxm_at_gen5_x16_with_its_18_nvlinks_up(collect):
    (gpu,), _ = collect(FakeGpu())
    assert links(gpu) == {
        "pcie_replay_errors": 0,
        "pcie_link_gen": 5,
        "pcie_link_gen_max": 5,
        "pcie_link_width": 16,
        "pcie_link_width_max": 16,
        "nvlink_crc_errors": 0,
        "nvlink_replay_errors": 0,
        "nvlink_recovery_errors": 0,
        "nvlink_links_down": 0,
    }


def test_a_downtrained_link_replays_and_nvlink_errors_summed_over_flit_and_data_crc(collect):
    worn = FakeGpu(pcie_replay=412, pcie_width=8, pcie_gen=4, nvlink_crc_flit=120, nvlink_crc_data=7,
                   nvlink_replay=3, nvlink_recovery=1, nvlink_active=(True,) * 16 + (False, False))  # fmt: skip
    (gpu,), _ = collect(worn)
    assert (gpu.pcie_link_width, gpu.pcie_link_width_max, gpu.pcie_link_gen, gpu.pcie_link_gen_max) == (8, 16, 4, 5)
    assert gpu.pcie_replay_errors == 412 and gpu.nvlink_crc_errors == 127
    assert (gpu.nvlink_replay_errors, gpu.nvlink_recovery_errors, gpu.nvlink_links_down) == (3, 1, 2)


def test_a_gpu_without_nvlink_has_no_nvlink_fields_and_its_pcie_ones_still(collect):
    (pcie_card,), _ = collect(FakeGpu(name="NVIDIA H100 PCIe", nvlink_active=()))
    assert pcie_card.nvlink_crc_errors is None and pcie_card.nvlink_links_down is None
    assert pcie_card.pcie_link_width == 16 and pcie_card.pcie_replay_errors == 0


def test_calls_an_old_driver_lacks_or_refuses_give_no_field_and_the_rest_flows(collect):
    refused = FakeGpu(unsupported={"nvmlDeviceGetPcieReplayCounter", "nvmlDeviceGetFieldValues"})
    (gpu,), _ = collect(refused)
    assert gpu.pcie_replay_errors is None and gpu.nvlink_crc_errors is None
    assert gpu.pcie_link_gen == 5 and gpu.utilization_percent == 97.0
    old = make_fake_pynvml([FakeGpu()])
    for name in ("nvmlDeviceGetFieldValues", "nvmlDeviceGetNvLinkState", "nvmlDeviceGetMaxPcieLinkWidth"):
        delattr(old, name)
    (gpu,), _ = collect(binding=old)
    assert gpu.nvlink_crc_errors is None and gpu.pcie_link_width_max is None and gpu.pcie_link_width == 16


def test_the_maximum_generation_and_width_are_asked_once(collect, monkeypatch):
    fake = make_fake_pynvml([FakeGpu()])
    asked = []
    original = fake.nvmlDeviceGetMaxPcieLinkWidth
    fake.nvmlDeviceGetMaxPcieLinkWidth = lambda handle: asked.append(handle) or original(handle)
    monkeypatch.setitem(sys.modules, "pynvml", fake)
    collector = NvmlCollector()
    samples = [collector.collect(now=float(t)).gpus[0] for t in range(5)]
    collector.close()
    assert len(asked) == 1 and all(s.pcie_link_width_max == 16 for s in samples)
