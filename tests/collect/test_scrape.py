"""Scrape: real dcgm-exporter and node-exporter expositions (tests/fixtures/scrape/SOURCES.md) read into samples,
and served by a real HTTP server on loopback to the collector, healthy and in every way a target fails."""

from __future__ import annotations

import gzip
import logging
import socket
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from trainpulse_otel.collect.base import Collector
from trainpulse_otel.collect.exposition import (
    DCGM_FIELDS,
    NODE_EXPORTER_COUNTERS,
    ScrapeError,
    XidGauge,
    gpus_from_dcgm,
    parse_samples,
    ports_from_node_exporter,
    read_dcgm,
)
from trainpulse_otel.collect.scrape import ScrapeCollector, fetch
from trainpulse_otel.samples import GpuSample
from trainpulse_otel.samples.ports import PMA_COUNTERS

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "scrape"
MIB = 1 << 20
SCRAPE_LOGGER = "trainpulse_otel.collect.scrape"


def fixture(name: str) -> str:
    return (FIXTURES / name).read_text()


L40S = fixture("dcgm_l40s_upcloud.txt")
L4 = fixture("dcgm_l4_kops.txt")
PODS = fixture("dcgm_exporter_1.4.6_pods.txt")
NODE = fixture("node_exporter_infiniband.txt")
#: The label set of the L40S fixture's series, to build lines for fields that fixture does not carry.
L40S_LABELS = (
    'gpu="0",UUID="GPU-5b4e07f6-3a86-4340-039d-25f2a83cdc43",pci_bus_id="00000000:00:07.0",device="nvidia0",'
    'modelName="NVIDIA L40S",Hostname="gpu1-wl8sg",DCGM_FI_DRIVER_VERSION="595.58.03"'
)


def dcgm_line(field: str, value: str, labels: str = L40S_LABELS) -> str:
    return f"{field}{{{labels}}} {value}\n"


# ---------------------------------------------------------------- dcgm-exporter


def test_the_l40s_exposition_reads_as_its_values_in_bytes_and_units():
    (gpu,) = gpus_from_dcgm(L40S)
    assert gpu == GpuSample(
        index=0,
        uuid="GPU-5b4e07f6-3a86-4340-039d-25f2a83cdc43",
        name="NVIDIA L40S",
        utilization_percent=0.0,
        memory_utilization_percent=0.0,
        memory_used_bytes=0,
        memory_total_bytes=(0 + 45459 + 608) * MIB,  # FB_TOTAL absent: used + free + reserved
        temperature_celsius=32.0,
        power_watts=35.686,
        sm_clock_mhz=210.0,
        remapped_rows_failed=0,
        pcie_replay_errors=0,  # a counter the parser renames DCGM_FI_DEV_PCIE_REPLAY_COUNTER_total
    )


def test_the_l4_exposition_reads_as_its_values():
    (gpu,) = gpus_from_dcgm(L4)
    assert (gpu.uuid, gpu.name, gpu.temperature_celsius, gpu.power_watts) == (
        "GPU-c2f76b33-7953-256e-8f33-1343419b1a1c",
        "NVIDIA L4",
        31.0,
        16.365,
    )
    assert (gpu.memory_used_bytes, gpu.memory_total_bytes) == (0, (22563 + 470) * MIB)


def test_an_old_exporters_not_supported_sentinels_are_unknown_not_numbers():
    # dcgm-exporter 1.4.6 printed DCGM_INT64_NOT_SUPPORTED (9223372036854775794) for ECC and NVLink on this board.
    reading = read_dcgm_text(PODS)
    gpu0, gpu1 = reading.gpus
    assert (gpu0.index, gpu0.uuid, gpu0.name) == (0, "GPU-c0b5694b-2b5d-6b20-f903-558341437f6b", None)
    assert (gpu1.index, gpu1.temperature_celsius, gpu1.power_watts, gpu1.sm_clock_mhz) == (1, 31.0, 4.818, 139.0)
    assert (gpu0.memory_used_bytes, gpu0.memory_total_bytes) == (0, 5057 * MIB)  # no FB_RESERVED: used + free
    assert gpu0.ecc_uncorrected_errors is gpu0.ecc_corrected_errors is gpu0.nvlink_crc_errors is None
    assert gpu0.nvlink_replay_errors is gpu0.nvlink_recovery_errors is None
    assert reading.last_xid == {(None, 0): 0, (None, 1): 0}
    assert gpu0.xid_errors is None  # the gauge is not an event list: the collector diffs it


def read_dcgm_text(text: str, node: str | None = None):
    return read_dcgm(parse_samples(text), node)


def test_one_hostname_is_this_node_or_the_node_passed():
    assert gpus_from_dcgm(L40S)[0].node is None
    assert gpus_from_dcgm(L40S, node="worker-3")[0].node == "worker-3"


def test_several_hostnames_key_each_gpu_by_its_hostname_whatever_node_is_passed():
    federated = gpus_from_dcgm(L40S + L4, node="ignored")
    assert [(g.key, g.name) for g in federated] == [
        (("gpu1-wl8sg", 0), "NVIDIA L40S"),
        (("i-030791dc5a37cd257", 0), "NVIDIA L4"),
    ]


def test_every_mapped_field_converts_to_its_unit():
    # Field names from dcgm_fields.h; these series are not in the captured fixtures, so the lines reuse its labels.
    text = L40S + "".join(
        dcgm_line(field, value)
        for field, value in [
            ("DCGM_FI_DEV_FB_TOTAL", "46068"),
            ("DCGM_FI_DEV_ENFORCED_POWER_LIMIT", "350.000000"),
            ("DCGM_FI_DEV_POWER_MGMT_LIMIT", "300.000000"),  # the requested limit: the enforced one wins
            ("DCGM_FI_DEV_MAX_SM_CLOCK", "2520"),
            ("DCGM_FI_DEV_CLOCKS_EVENT_REASONS", str(0x1 | 0x4 | 0x40 | 0x100)),  # 0x100: a setting, not named
            ("DCGM_FI_DEV_ECC_SBE_VOL_TOTAL", "12"),
            ("DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", "1"),
            ("DCGM_FI_DEV_ROW_REMAP_PENDING", "1"),
            ("DCGM_FI_DEV_PCIE_LINK_GEN", "3"),
            ("DCGM_FI_DEV_PCIE_MAX_LINK_GEN", "4"),
            ("DCGM_FI_DEV_PCIE_LINK_WIDTH", "8"),
            ("DCGM_FI_DEV_PCIE_MAX_LINK_WIDTH", "16"),
            ("DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL", "5"),
            ("DCGM_FI_DEV_NVLINK_CRC_DATA_ERROR_COUNT_TOTAL", "2"),
            ("DCGM_FI_DEV_NVLINK_REPLAY_ERROR_COUNT_TOTAL", "9"),
            ("DCGM_FI_DEV_NVLINK_RECOVERY_ERROR_COUNT_TOTAL", "1"),
            ("DCGM_FI_DEV_XID_ERRORS", "79"),
        ]
    )
    reading = read_dcgm_text(text)
    (gpu,) = reading.gpus
    assert gpu.memory_total_bytes == 46068 * MIB  # FB_TOTAL, when given, is the total
    assert (gpu.power_limit_watts, gpu.max_sm_clock_mhz) == (350.0, 2520.0)
    assert gpu.throttle_reasons == ("gpu_idle", "sw_power_cap", "hw_thermal")
    assert (gpu.ecc_corrected_errors, gpu.ecc_uncorrected_errors, gpu.remapped_rows_pending) == (12, 1, 1)
    assert (gpu.pcie_link_gen, gpu.pcie_link_gen_max, gpu.pcie_link_width, gpu.pcie_link_width_max) == (3, 4, 8, 16)
    assert (gpu.nvlink_crc_errors, gpu.nvlink_replay_errors, gpu.nvlink_recovery_errors) == (7, 9, 1)
    assert reading.last_xid == {(None, 0): 79}


def test_the_deprecated_throttle_name_is_read_too():
    # The value and name as the DataDog dcgm fixture captured from a Tesla T4 (SOURCES.md): 1 is GPU idle.
    (gpu,) = gpus_from_dcgm(L40S + dcgm_line("DCGM_FI_DEV_CLOCK_THROTTLE_REASONS", "1"))
    assert gpu.throttle_reasons == ("gpu_idle",)


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("DCGM_FI_DEV_GPU_TEMP", "NaN"),
        ("DCGM_FI_DEV_GPU_TEMP", "-4"),
        ("DCGM_FI_DEV_GPU_TEMP", "+Inf"),
        ("DCGM_FI_DEV_GPU_TEMP", "9223372036854775794"),  # DCGM_INT64_NOT_SUPPORTED
        ("DCGM_FI_DEV_GPU_TEMP", "140737488355328"),  # DCGM_FP64_BLANK
        ("DCGM_FI_DEV_GPU_TEMP", "2147483634"),  # DCGM_INT32_NOT_SUPPORTED
        ("DCGM_FI_DEV_GPU_UTIL", "101"),
        ("DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", "1.5"),
        ("DCGM_FI_DEV_ROW_REMAP_PENDING", "2"),
    ],
)
def test_a_value_out_of_range_is_dropped_not_raised(field, value):
    attr = DCGM_FIELDS[field][0]
    (gpu,) = gpus_from_dcgm(dcgm_line(field, value))
    assert getattr(gpu, attr) is None


def test_unknown_series_and_series_without_a_gpu_are_ignored():
    text = L40S + "DCGM_FI_DEV_FB_USED 12\n" + dcgm_line("DCGM_FI_DEV_FUTURE_FIELD", "3") + "go_goroutines 7\n"
    assert gpus_from_dcgm(text) == gpus_from_dcgm(L40S)


def test_a_mig_gpus_instance_series_give_device_wide_fields_but_not_memory():
    # MIG: dcgm-exporter repeats device-wide fields once per GPU instance (GPU_I_ID) and gives memory per instance.
    mig = L40S_LABELS.replace('Hostname="gpu1-wl8sg"', 'GPU_I_PROFILE="2g.20gb",GPU_I_ID="3",Hostname="gpu1-wl8sg"')
    text = dcgm_line("DCGM_FI_DEV_SM_CLOCK", "1410", mig) + dcgm_line("DCGM_FI_DEV_FB_USED", "10", mig)
    (gpu,) = gpus_from_dcgm(text)
    assert (gpu.sm_clock_mhz, gpu.memory_used_bytes) == (1410.0, None)
    (whole,) = gpus_from_dcgm(text + dcgm_line("DCGM_FI_DEV_SM_CLOCK", "210"))
    assert whole.sm_clock_mhz == 210.0  # the whole GPU's series beats an instance's


@pytest.mark.parametrize(
    "text", ["<html><body>Not Found</body></html>", 'DCGM_FI_DEV_GPU_UTIL{gpu="0" 12\n', "DCGM_FI_DEV_GPU_UTIL x\n"]
)
def test_a_malformed_exposition_is_a_scrape_error_naming_the_target(text):
    with pytest.raises(ScrapeError, match=r"^node-7:9400: not a Prometheus text exposition") as caught:
        gpus_from_dcgm(text, target="node-7:9400")
    assert isinstance(caught.value, ValueError) and caught.value.kind == "parse"
    with pytest.raises(ScrapeError):
        ports_from_node_exporter(text)


def test_the_xid_gauge_reports_a_code_once_when_it_changes():
    gauge, gpu = XidGauge(), (None, 0)
    assert gauge.new_codes({gpu: 43}) == {gpu: ()}  # the first scrape is the baseline: 43 may be hours old
    assert gauge.new_codes({gpu: 43}) == {gpu: ()}  # the same last code again: nothing new
    assert gauge.new_codes({gpu: 79}) == {gpu: (79,)}
    assert gauge.new_codes({gpu: 79}) == {gpu: ()}
    assert gauge.new_codes({gpu: 0}) == {gpu: ()}  # cleared (driver reload): no event
    assert gauge.new_codes({gpu: 79}) == {gpu: (79,)}


# ---------------------------------------------------------------- node-exporter


def test_node_exporters_infiniband_series_read_as_ports():
    ports = ports_from_node_exporter(NODE, node="ib-host")
    assert [(p.device, p.port) for p in ports] == [("i40iw0", 1), ("mlx4_0", 1), ("mlx4_0", 2)]
    i40iw, mlx4_1, mlx4_2 = ports
    assert (i40iw.state, i40iw.phys_state, i40iw.rate_gbps, i40iw.counters) == ("ACTIVE", "LinkUp", 10.0, ())
    assert (mlx4_1.state, mlx4_1.phys_state, mlx4_1.rate_gbps, mlx4_1.link_layer) == ("ACTIVE", "LinkUp", 40.0, None)
    assert mlx4_1.counters == (
        ("link_downed", 0),
        ("link_error_recovery", 0),
        ("port_rcv_errors", 0),
        ("port_xmit_discards", 5),  # node_infiniband_port_discards_transmitted_total
    )
    assert mlx4_2.counters == (("link_downed", 0), ("link_error_recovery", 0))
    assert {p.node for p in ports} == {"ib-host"}


def test_every_contract_counter_has_its_node_exporter_series():
    assert sorted(NODE_EXPORTER_COUNTERS.values()) == sorted(PMA_COUNTERS)  # it exports no hw_counters/


def test_port_states_by_the_ib_spec_numbers():
    lines = "".join(
        f'node_infiniband_state_id{{device="mlx5_{n}",port="1"}} {n}\n'
        f'node_infiniband_physical_state_id{{device="mlx5_{n}",port="1"}} {n + 1}\n'
        for n in range(6)
    )
    states = [(p.state, p.phys_state) for p in ports_from_node_exporter(lines)]
    assert states == [
        (None, "Sleep"),
        ("DOWN", "Polling"),
        ("INIT", "Disabled"),
        ("ARMED", "PortConfigurationTraining"),
        ("ACTIVE", "LinkUp"),
        ("ACTIVE_DEFER", "LinkErrorRecovery"),
    ]


def test_a_node_exporter_counter_is_not_mistaken_for_a_dcgm_sentinel():
    # 0x7ffffff0 is DCGM_INT32_BLANK for a DCGM field, an ordinary count for an HCA's 32-bit counter.
    line = 'node_infiniband_symbol_error_total{device="mlx4_0",port="1"} 2147483632\n'
    (port,) = ports_from_node_exporter(line)
    assert port.counter("symbol_error") == 0x7FFFFFF0


# ---------------------------------------------------------------- a real HTTP server


class Routes(dict):
    """Path → (status, headers, body or a callable that writes it) the server answers with."""


@pytest.fixture(scope="module")
def bomb() -> bytes:
    return gzip.compress(bytes(64 << 20), compresslevel=1)  # 64 MiB of zeros in ~280 kB


@pytest.fixture
def server(bomb) -> Iterator[tuple[str, Routes]]:
    routes = Routes()
    routes.update(
        {
            "/dcgm": (200, {}, L40S.encode()),
            "/dcgm.gz": (200, {"Content-Encoding": "gzip"}, gzip.compress(L4.encode())),
            "/node": (200, {}, NODE.encode()),
            "/missing": (404, {}, b"404 page not found\n"),
            "/slow": (200, {}, lambda w: (time.sleep(1.5), w.write(L40S.encode()))),
            "/drip": (200, {}, lambda w: [(w.write(b"#"), w.flush(), time.sleep(0.05)) for _ in range(40)]),
            "/big": (200, {}, b"# " + b"x" * 4096 + b"\n"),
            "/bomb": (200, {"Content-Encoding": "gzip"}, bomb),
            "/garbage": (200, {}, b"<html><body>It works!</body></html>\n"),
            "/latin1": (200, {}, "# HELP caf\xe9\n".encode("latin-1")),
            "/empty": (200, {}, b"# nothing here\n"),
        }
    )

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            status, headers, body = routes.get(self.path, (404, {}, b""))
            self.send_response(status)
            for key, value in headers.items():
                self.send_header(key, value)
            if callable(body):
                self.end_headers()
                body(self.wfile)
                return
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    httpd.daemon_threads = True
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}", routes
    httpd.shutdown()
    httpd.server_close()


def refused_url() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}/metrics"


def test_fetch_reads_plain_and_gzip_bodies(server):
    base, _ = server
    assert fetch(base + "/dcgm") == L40S
    assert fetch(base + "/dcgm.gz") == L4


@pytest.mark.parametrize(
    ("path", "kind", "message", "kwargs"),
    [
        ("/missing", "http", "HTTP 404", {}),
        ("/slow", "timeout", "no answer within 0.3 s", {"timeout_s": 0.3}),
        ("/drip", "timeout", "within the timeout", {"timeout_s": 0.5}),
        ("/big", "size", "larger than 1000 bytes", {"max_bytes": 1000}),
        ("/bomb", "size", "inflates past 16777216 bytes", {}),
        ("/latin1", "encoding", "not UTF-8", {}),
    ],
)
def test_fetch_names_each_failure(server, path, kind, message, kwargs):
    base, _ = server
    with pytest.raises(ScrapeError, match=message) as caught:
        fetch(base + path, **kwargs)
    assert caught.value.kind == kind and str(caught.value).startswith(base + path)


def test_fetch_of_a_refused_port_or_another_scheme_is_a_scrape_error():
    url = refused_url()
    with pytest.raises(ScrapeError, match="cannot connect") as caught:
        fetch(url)
    assert caught.value.kind == "connect" and url in str(caught.value)
    with pytest.raises(ScrapeError, match="not an http"):
        fetch("file:///etc/passwd")


def test_the_collector_reads_a_dcgm_and_a_node_exporter_target(server):
    base, _ = server
    collector = ScrapeCollector([base + "/dcgm", base + "/node"])
    try:
        assert isinstance(collector, Collector)
        seen = collector.collect(time.time())
    finally:
        collector.close()
    assert seen.gpus == gpus_from_dcgm(L40S) and seen.gpus[0].xid_errors is None
    assert seen.ports == ports_from_node_exporter(NODE)
    assert collector.failures == {base + "/dcgm": 0, base + "/node": 0}


def test_the_collector_reads_a_gzip_target(server):
    base, _ = server
    collector = ScrapeCollector([base + "/dcgm.gz"])
    try:
        assert collector.collect(time.time()).gpus == gpus_from_dcgm(L4)
    finally:
        collector.close()


def test_failing_targets_are_counted_logged_once_and_never_raised(server, caplog):
    base, _ = server
    bad = {
        base + "/missing": "HTTP 404",
        refused_url(): "cannot connect",
        base + "/slow": "no answer within 0.3 s",
        base + "/bomb": "inflates past",
        base + "/garbage": "not a Prometheus text exposition",
        base + "/empty": "holds no DCGM_FI_* or node_* series",
    }
    collector = ScrapeCollector([base + "/dcgm", *bad], timeout_s=0.3)
    caplog.set_level(logging.INFO, logger=SCRAPE_LOGGER)
    try:
        first = collector.collect(time.time())
        second = collector.collect(time.time())
    finally:
        collector.close()
    assert first.gpus == second.gpus == gpus_from_dcgm(L40S)
    assert collector.failures == {base + "/dcgm": 0, **dict.fromkeys(bad, 2)}
    warnings = [r.getMessage() for r in caplog.records if r.name == SCRAPE_LOGGER and r.levelno == logging.WARNING]
    assert len(warnings) == len(bad)  # once per target, not once per tick
    for url, problem in bad.items():
        assert [w for w in warnings if url in w and problem in w], (url, warnings)


def test_a_target_that_recovers_is_logged_once_more(server, caplog):
    base, routes = server
    collector = ScrapeCollector([base + "/flaky"])
    caplog.set_level(logging.INFO, logger=SCRAPE_LOGGER)
    try:
        assert collector.collect(time.time()).gpus is None
        routes["/flaky"] = (200, {}, L40S.encode())
        assert collector.collect(time.time()).gpus == gpus_from_dcgm(L40S)
    finally:
        collector.close()
    messages = [r.getMessage() for r in caplog.records if r.name == SCRAPE_LOGGER]
    assert len(messages) == 2 and "HTTP 404" in messages[0] and messages[1] == f"scraping {base}/flaky again"
    assert collector.failures == {base + "/flaky": 1}


def test_the_collector_turns_the_xid_gauge_into_new_xids(server):
    base, routes = server
    collector = ScrapeCollector([base + "/xid"])
    try:
        seen = []
        for code in ("0", "79", "79", "43"):
            routes["/xid"] = (200, {}, (L40S + dcgm_line("DCGM_FI_DEV_XID_ERRORS", code)).encode())
            seen.append(collector.collect(time.time()).gpus[0].xid_errors)
    finally:
        collector.close()
    assert seen == [(), (79,), (), (43,)]


def test_several_dcgm_targets_tag_each_gpu_with_its_hostname(server):
    base, routes = server
    routes["/other"] = (200, {}, L4.encode())
    collector = ScrapeCollector([base + "/dcgm", base + "/other"])
    try:
        gpus = collector.collect(time.time()).gpus
    finally:
        collector.close()
    assert [g.key for g in gpus] == [("gpu1-wl8sg", 0), ("i-030791dc5a37cd257", 0)]


def test_the_collector_refuses_what_is_not_an_http_url():
    with pytest.raises(ValueError, match="http"):
        ScrapeCollector(["localhost:9400/metrics"])
    with pytest.raises(ValueError, match="none given"):
        ScrapeCollector([])
