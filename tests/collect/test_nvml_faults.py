"""Failing GPUs through the fake pynvml and recorded kernel-log lines: XIDs, ECC, remapped rows, a lost GPU."""

from __future__ import annotations

import logging
import sys
from pathlib import Path

import pytest

from tests.fakes.fake_pynvml import FakeGpu, make_fake_pynvml, raise_xid
from trainpulse_otel.collect.base import Collected
from trainpulse_otel.collect.kmsg import KernelXidLog, parse_xid_line, xids_by_gpu
from trainpulse_otel.collect.nvml import NvmlCollector
from trainpulse_otel.telemetry.latest import LatestSamples

KERNEL_LOG = Path(__file__).parent.parent / "fixtures" / "kernel_log" / "dmesg_xid.txt"


@pytest.fixture
def install(monkeypatch):
    def _install(gpus):
        fake = make_fake_pynvml(gpus)
        monkeypatch.setitem(sys.modules, "pynvml", fake)
        return fake

    return _install


def test_xid_events_are_drained_each_tick_without_waiting_and_reported_once(install):
    fake = install([FakeGpu(uuid=f"GPU-{i}") for i in range(3)])
    collector = NvmlCollector()
    assert collector.collect(1.0).gpus[1].xid_errors == ()

    raise_xid(fake, 1, 13)
    raise_xid(fake, 1, 48)
    raise_xid(fake, 2, 79)
    first = collector.collect(2.0).gpus
    second = collector.collect(3.0).gpus

    assert [g.xid_errors for g in first] == [(), (13, 48), (79,)]
    assert [g.xid_errors for g in second] == [(), (), ()]
    assert fake.state.waits and set(fake.state.waits) == {0}  # never blocks the tick


def test_ecc_counts_and_remapped_rows_are_read(install):
    install([FakeGpu(ecc_corrected=1234, ecc_uncorrected=2, ecc_aggregate_extra=99, remapped_rows=(5, 1, 1, 0))])
    (gpu,) = NvmlCollector().collect(1.0).gpus
    assert gpu.ecc_corrected_errors == 1234  # the volatile count, not the aggregate (1333)
    assert gpu.ecc_uncorrected_errors == 2
    assert (gpu.remapped_rows_pending, gpu.remapped_rows_failed) == (1, 0)


def test_unsupported_fault_counters_are_unknown_and_logged_once(install, caplog):
    caplog.set_level(logging.INFO)
    install([FakeGpu(unsupported={"nvmlDeviceGetRemappedRows", "nvmlDeviceGetTotalEccErrors"})])
    collector = NvmlCollector()
    gpus = [collector.collect(float(t)).gpus[0] for t in range(3)]
    assert {(g.ecc_corrected_errors, g.remapped_rows_pending, g.remapped_rows_failed) for g in gpus} == {
        (None, None, None)
    }
    assert gpus[0].utilization_percent == 97.0
    remap = [r for r in caplog.records if "remapped_rows unavailable" in r.getMessage()]
    assert len(remap) == 1 and remap[0].levelno == logging.INFO


def test_a_gpu_falling_off_the_bus_reports_its_xid_then_leaves_the_list(install, caplog):
    caplog.set_level(logging.INFO)
    fake = install([FakeGpu(uuid=f"GPU-{i}") for i in range(8)])
    collector = NvmlCollector()
    latest = LatestSamples()
    latest.put(collector.collect(1.0), 1.0)

    raise_xid(fake, 4, 79)
    fake.state.gpus[4].lost = True
    falls = collector.collect(2.0).gpus
    latest.put(Collected(gpus=falls), 2.0)
    later = [collector.collect(float(t)).gpus for t in range(3, 6)]

    stub = next(g for g in falls if g.index == 4)
    assert stub.xid_errors == (79,) and stub.utilization_percent is None and stub.uuid == "GPU-4"
    assert all(4 not in [g.index for g in gpus] for gpus in later)
    assert [(x.gpu_index, x.xid, x.count) for x in latest.xid_counts()] == [(4, 79, 1)]
    assert len([r for r in caplog.records if "is lost" in r.getMessage()]) == 1


def test_recorded_kernel_log_lines_parse_to_pci_address_and_code():
    lines = KERNEL_LOG.read_text().splitlines()
    parsed = [p for p in map(parse_xid_line, lines) if p is not None]
    assert parsed == [
        ((0, 0x3B, 0), 79),
        ((0, 0xDB, 0), 63),
        ((0, 0xDB, 0), 94),
        ((0, 0x18, 0), 13),
        ((0, 0x2A, 0), 48),
        ((0, 0x2A, 0), 74),
        ((0, 0x9A, 0), 119),
    ]
    gpu_of = {(0, 0x3B, 0): 4, (0, 0x2A, 0): 1}
    assert xids_by_gpu(lines, gpu_of) == {4: [79], 1: [48, 74]}


def test_without_nvml_events_xids_come_from_the_kernel_log(install, tmp_path):
    log_file = tmp_path / "kmsg"
    log_file.write_text("[1.0] NVRM: Xid (PCI:0000:3b:00): 79, an XID from before the daemon started\n")
    gpus = [FakeGpu(uuid=f"GPU-{i}", pci_bus_id=f"00000000:{bus}:00.0") for i, bus in enumerate(("18", "2A", "3B"))]
    for g in gpus:
        g.events_unsupported = True
    install(gpus)
    collector = NvmlCollector(kernel_log=lambda: KernelXidLog(str(log_file)))
    assert [g.xid_errors for g in collector.collect(1.0).gpus] == [(), (), ()]  # history is not news

    with log_file.open("a") as f:
        f.write(KERNEL_LOG.read_text())
    assert [g.xid_errors for g in collector.collect(2.0).gpus] == [(13,), (48, 74), (79,)]
    assert [g.xid_errors for g in collector.collect(3.0).gpus] == [(), (), ()]


def test_an_unreadable_kernel_log_yields_nothing_and_never_fails(tmp_path, caplog):
    caplog.set_level(logging.INFO)
    log = KernelXidLog(str(tmp_path / "no-such-kmsg"))
    assert not log.readable
    assert log.read_lines() == [] and log.read_lines() == []
    assert len([r for r in caplog.records if "not readable" in r.getMessage()]) == 1
