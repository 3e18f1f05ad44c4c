"""HostCollector: real readings on this machine, and counter rates under control."""

from __future__ import annotations

import logging
from types import SimpleNamespace

import psutil
import pytest

from trainpulse_otel.collect.base import Collector
from trainpulse_otel.collect.host import Counters, HostCollector, rate, rates
from trainpulse_otel.samples import parse_host, to_dict

RATE_FIELDS = (
    "disk_read_bytes_per_sec",
    "disk_write_bytes_per_sec",
    "net_rx_bytes_per_sec",
    "net_tx_bytes_per_sec",
)


# ---------------------------------------------------------- this machine


def test_real_host_values_are_plausible_and_pass_the_contract():
    collector = HostCollector()
    assert isinstance(collector, Collector) and collector.name == "host"

    first = collector.collect(now=1000.0)
    host = first.host

    assert first.gpus is None and first.training is None
    assert 0.0 <= host.cpu_percent <= 100.0
    assert host.cpu_count == psutil.cpu_count(logical=True) >= 1
    assert all(x is not None and x >= 0 for x in (host.load1, host.load5, host.load15))
    assert 0 < host.memory_available_bytes <= host.memory_total_bytes
    assert 0 <= host.swap_used_bytes <= max(host.swap_total_bytes, host.swap_used_bytes)
    assert all(getattr(host, f) is None for f in RATE_FIELDS)  # nothing to diff yet
    assert parse_host(to_dict(host)) == host  # in range for every contract rule


def test_real_host_has_rates_on_the_second_call():
    collector = HostCollector()
    collector.collect(now=1000.0)
    with open(__file__, "rb") as f:  # a little disk activity, not needed for a >= 0 rate
        f.read()
    host = collector.collect(now=1001.0).host

    expected = {
        "disk_read_bytes_per_sec": psutil.disk_io_counters() is not None,
        "disk_write_bytes_per_sec": psutil.disk_io_counters() is not None,
        "net_rx_bytes_per_sec": True,
        "net_tx_bytes_per_sec": True,
    }
    for field, present in expected.items():
        value = getattr(host, field)
        if present:
            assert value is not None and value >= 0, field
    parse_host(to_dict(host))


# ----------------------------------------------------------- pure rates


@pytest.mark.parametrize(
    ("previous", "current", "seconds", "expected"),
    [
        (1000, 3000, 2.0, 1000.0),
        (5, 5, 1.0, 0.0),
        (None, 10, 1.0, None),  # first reading
        (10, None, 1.0, None),  # counter unavailable now
        (3000, 1000, 1.0, None),  # reset or wrap
        (1000, 2000, 0.0, None),  # same tick twice
        (1000, 2000, -1.0, None),  # clock went backwards
    ],
)
def test_rate(previous, current, seconds, expected):
    assert rate(previous, current, seconds) == expected


def test_rates_maps_each_counter_to_its_field():
    before = Counters(disk_read=0, disk_write=100, net_rx=1_000, net_tx=None)
    after = Counters(disk_read=4_096, disk_write=50, net_rx=3_000, net_tx=10)
    assert rates(before, after, 2.0) == {
        "disk_read_bytes_per_sec": 2048.0,
        "disk_write_bytes_per_sec": None,
        "net_rx_bytes_per_sec": 1000.0,
        "net_tx_bytes_per_sec": None,
    }


# ------------------------------------------------------ controlled psutil


class FakeCounters:
    """Stands in for psutil's disk and network counters; tests move them."""

    def __init__(self) -> None:
        self.disk = SimpleNamespace(read_bytes=10_000, write_bytes=20_000)
        self.nics = {
            "eth0": SimpleNamespace(bytes_recv=1_000_000, bytes_sent=500_000),
            "ib0": SimpleNamespace(bytes_recv=0, bytes_sent=0),
            "lo": SimpleNamespace(bytes_recv=9_999_999, bytes_sent=9_999_999),
            "veth3a1f": SimpleNamespace(bytes_recv=7_777_777, bytes_sent=7_777_777),
            "docker0": SimpleNamespace(bytes_recv=5_555_555, bytes_sent=5_555_555),
        }

    def disk_io_counters(self):
        return self.disk

    def net_io_counters(self, pernic=False):
        assert pernic, "the collector filters interfaces, so it needs them one by one"
        return dict(self.nics)

    def add(self, read=0, write=0, rx=0, tx=0, nic="eth0", virtual=0):
        self.disk.read_bytes += read
        self.disk.write_bytes += write
        self.nics[nic].bytes_recv += rx
        self.nics[nic].bytes_sent += tx
        for name in ("lo", "veth3a1f", "docker0"):
            self.nics[name].bytes_recv += virtual
            self.nics[name].bytes_sent += virtual


@pytest.fixture
def counters(monkeypatch):
    fake = FakeCounters()
    monkeypatch.setattr(psutil, "disk_io_counters", fake.disk_io_counters)
    monkeypatch.setattr(psutil, "net_io_counters", fake.net_io_counters)
    return fake


def host_rates(collector: HostCollector, now: float) -> dict[str, float | None]:
    host = collector.collect(now=now).host
    return {f: getattr(host, f) for f in RATE_FIELDS}


def test_rates_use_the_tick_timestamps_and_skip_virtual_nics(counters):
    collector = HostCollector()
    assert set(host_rates(collector, 100.0).values()) == {None}

    counters.add(read=8_192, write=40_000, rx=2_000_000, tx=1_000_000, virtual=10**9)
    counters.add(rx=500_000, tx=250_000, nic="ib0")
    assert host_rates(collector, 102.0) == {
        "disk_read_bytes_per_sec": 4_096.0,
        "disk_write_bytes_per_sec": 20_000.0,
        "net_rx_bytes_per_sec": 1_250_000.0,  # eth0 + ib0, never lo/veth/docker
        "net_tx_bytes_per_sec": 625_000.0,
    }


def test_counter_reset_gives_none_for_that_tick_only(counters):
    collector = HostCollector()
    collector.collect(now=0.0)
    counters.add(read=1_000, rx=1_000)
    assert host_rates(collector, 1.0)["disk_read_bytes_per_sec"] == 1_000.0

    counters.disk.read_bytes = 0  # e.g. a device re-attached
    counters.nics["eth0"].bytes_recv = 10  # e.g. the NIC driver reloaded
    after_reset = host_rates(collector, 2.0)
    assert after_reset["disk_read_bytes_per_sec"] is None
    assert after_reset["net_rx_bytes_per_sec"] is None
    assert after_reset["disk_write_bytes_per_sec"] == 0.0

    counters.add(read=300, rx=600)
    assert host_rates(collector, 5.0)["disk_read_bytes_per_sec"] == 100.0
    assert host_rates(collector, 6.0)["net_rx_bytes_per_sec"] == 0.0


def test_no_disks_means_no_disk_rates(counters, monkeypatch):
    monkeypatch.setattr(psutil, "disk_io_counters", lambda: None)
    collector = HostCollector()
    collector.collect(now=0.0)
    counters.add(rx=100)
    r = host_rates(collector, 1.0)
    assert (r["disk_read_bytes_per_sec"], r["disk_write_bytes_per_sec"]) == (None, None)
    assert r["net_rx_bytes_per_sec"] == 100.0


def test_a_failing_psutil_call_blanks_its_fields_and_logs_once(counters, monkeypatch, caplog):
    def broken_loadavg():
        raise OSError("no /proc/loadavg")

    monkeypatch.setattr(psutil, "getloadavg", broken_loadavg)
    caplog.set_level(logging.WARNING)
    collector = HostCollector()

    hosts = [collector.collect(now=float(i)).host for i in range(4)]

    for host in hosts:
        assert (host.load1, host.load5, host.load15) == (None, None, None)
        assert host.memory_total_bytes > 0 and host.cpu_count >= 1
    assert hosts[-1].disk_read_bytes_per_sec == 0.0
    logged = [r for r in caplog.records if "host load unavailable" in r.getMessage()]
    assert len(logged) == 1 and "no /proc/loadavg" in logged[0].getMessage()


def test_counter_failure_blanks_rates_until_two_good_readings(counters, monkeypatch):
    collector = HostCollector()
    collector.collect(now=0.0)

    def broken(pernic=False):
        raise PermissionError("denied")

    working = psutil.net_io_counters
    monkeypatch.setattr(psutil, "net_io_counters", broken)
    assert host_rates(collector, 1.0)["net_rx_bytes_per_sec"] is None
    monkeypatch.setattr(psutil, "net_io_counters", working)
    assert host_rates(collector, 2.0)["net_rx_bytes_per_sec"] is None  # no previous reading
    counters.add(rx=50)
    assert host_rates(collector, 3.0)["net_rx_bytes_per_sec"] == 50.0
