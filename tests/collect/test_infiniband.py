"""read_ports and InfinibandCollector on fake sysfs trees built from real layouts and values.

Every tree below is copied from a public paste or fixture that tests/fixtures/sysfs/SOURCES.md names
(by the key in each constant's comment); files are written as the kernel writes them, with a newline.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from trainpulse_otel.collect.base import Collector
from trainpulse_otel.collect.infiniband import (
    COUNTER_MAX,
    MAX_READ_BYTES,
    InfinibandCollector,
    parse_counter,
    parse_link_layer,
    parse_rate,
    parse_state,
    read_ports,
)
from trainpulse_otel.samples import PMA_COUNTERS, PORT_COUNTERS, PortSample

# ------------------------------------------------------------------ real trees

# [openshift-cx6] state, phys_state, rate, link_layer of mlx5_0 (RoCE); [procfs-mlx5] its counters/, hw_counters/.
MLX5_0_ROCE = {
    "ports/1/state": "4: ACTIVE",
    "ports/1/phys_state": "5: LinkUp",
    "ports/1/rate": "200 Gb/sec (4X HDR)",
    "ports/1/link_layer": "Ethernet",
    "ports/1/counters/VL15_dropped": "0",
    "ports/1/counters/excessive_buffer_overrun_errors": "0",
    "ports/1/counters/link_downed": "0",
    "ports/1/counters/link_error_recovery": "0",
    "ports/1/counters/local_link_integrity_errors": "0",
    "ports/1/counters/multicast_rcv_packets": "0",
    "ports/1/counters/multicast_xmit_packets": "0",
    "ports/1/counters/port_rcv_constraint_errors": "0",
    "ports/1/counters/port_rcv_data": "18126345378",
    "ports/1/counters/port_rcv_errors": "0",
    "ports/1/counters/port_rcv_packets": "541889824",
    "ports/1/counters/port_rcv_remote_physical_errors": "0",
    "ports/1/counters/port_rcv_switch_relay_errors": "0",
    "ports/1/counters/port_xmit_constraint_errors": "0",
    "ports/1/counters/port_xmit_data": "2880761508848",
    "ports/1/counters/port_xmit_discards": "0",
    "ports/1/counters/port_xmit_packets": "10907922116",
    "ports/1/counters/port_xmit_wait": "0",
    "ports/1/counters/symbol_error": "0",
    "ports/1/counters/unicast_rcv_packets": "541889824",
    "ports/1/counters/unicast_xmit_packets": "10907922116",
    "ports/1/hw_counters/duplicate_request": "41",
    "ports/1/hw_counters/lifespan": "10",
    "ports/1/hw_counters/local_ack_timeout_err": "131",
    "ports/1/hw_counters/out_of_buffer": "0",
    "ports/1/hw_counters/out_of_sequence": "1",
    "ports/1/hw_counters/packet_seq_err": "1",
    "ports/1/hw_counters/req_cqe_error": "3481",
    "ports/1/hw_counters/resp_cqe_error": "8109",
    "ports/1/hw_counters/rnr_nak_retry_err": "0",
    "ports/1/hw_counters/roce_adp_retrans": "99",
    "ports/1/hw_counters/roce_slow_restart_cnps": "131",
    "ports/1/hw_counters/rx_read_requests": "175528982",
    "ports/1/hw_counters/rx_write_requests": "742114",
}

# [openshift-cx6] mlx5_1 (InfiniBand); [gpud-943] its counters/, verbatim: three error counters saturated.
MLX5_1_IB = {
    "ports/1/state": "4: ACTIVE",
    "ports/1/phys_state": "5: LinkUp",
    "ports/1/rate": "200 Gb/sec (4X HDR)",
    "ports/1/link_layer": "InfiniBand",
    "ports/1/counters/unicast_rcv_packets": "240037171331",
    "ports/1/counters/port_xmit_data": "205143497464492",
    "ports/1/counters/port_xmit_constraint_errors": "0",
    "ports/1/counters/VL15_dropped": "0",
    "ports/1/counters/port_rcv_errors": "0",
    "ports/1/counters/port_xmit_wait": "4294967295",
    "ports/1/counters/link_error_recovery": "0",
    "ports/1/counters/multicast_rcv_packets": "0",
    "ports/1/counters/multicast_xmit_packets": "0",
    "ports/1/counters/port_rcv_remote_physical_errors": "0",
    "ports/1/counters/port_rcv_packets": "240037171331",
    "ports/1/counters/unicast_xmit_packets": "242071897216",
    "ports/1/counters/excessive_buffer_overrun_errors": "15",
    "ports/1/counters/port_rcv_data": "205128687774249",
    "ports/1/counters/port_rcv_constraint_errors": "0",
    "ports/1/counters/link_downed": "255",
    "ports/1/counters/local_link_integrity_errors": "0",
    "ports/1/counters/port_xmit_discards": "65535",
    "ports/1/counters/port_rcv_switch_relay_errors": "2",
    "ports/1/counters/port_xmit_packets": "242071897216",
    "ports/1/counters/symbol_error": "0",
}

# [openshift-cx6] mlx5_2: a RoCE port administratively down.
MLX5_2_DISABLED = {
    "ports/1/state": "1: DOWN",
    "ports/1/phys_state": "3: Disabled",
    "ports/1/rate": "200 Gb/sec (4X HDR)",
    "ports/1/link_layer": "Ethernet",
}

# [gpud-482] mlx5_10: an InfiniBand port with no peer, in the kernel's words.
MLX5_10_POLLING = {
    "ports/1/state": "1: DOWN",
    "ports/1/phys_state": "2: Polling",
    "ports/1/rate": "10 Gb/sec (4X SDR)",
    "ports/1/link_layer": "InfiniBand",
}

# [procfs-mlx4] a dual-port ConnectX-3 on QDR.
MLX4_0 = {
    f"ports/{port}/{name}": value
    for port in (1, 2)
    for name, value in {
        "state": "4: ACTIVE",
        "phys_state": "5: LinkUp",
        "rate": "40 Gb/sec (4X QDR)",
        "link_layer": "InfiniBand",
        "counters/symbol_error": "0",
        "counters/link_downed": "0",
        "counters/port_xmit_wait": "3599" if port == 1 else "3846",
    }.items()
}

# [node-exporter-966] i40iw (iWARP) on an old kernel: every PMA counter file says so.
I40IW0 = {f"ports/1/counters/{name}": "N/A (no PMA)" for name in (*PORT_COUNTERS, "port_rcv_data")}

# [rxe-ibstatus] Soft-RoCE; [kernel-rxe] no PMA, so no counters/, and link_downed in hw_counters/.
RXE0 = {
    "ports/1/state": "4: ACTIVE",
    "ports/1/phys_state": "5: LinkUp",
    "ports/1/rate": "2.5 Gb/sec (1X SDR)",
    "ports/1/link_layer": "Ethernet",
    **{
        f"ports/1/hw_counters/{name}": "0"
        for name in ("sent_pkts", "rcvd_pkts", "duplicate_request", "link_downed", "rdma_sends", "rdma_recvs")
    },
}

# [netdata-9091], [node-exporter-966]: where the class symlinks point on real hosts.
DEVICE_PATHS = {
    "mlx5_0": "devices/pci0000:5d/0000:5d:00.0/0000:5e:00.0/infiniband/mlx5_0",
    "i40iw0": "devices/pci0000:05/0000:05:02.0/0000:07:00.0/0000:08:03.0/0000:09:00.0/infiniband/i40iw0",
}


def build(root: Path, devices: dict[str, dict[str, str]]) -> Path:
    """A sysfs tree under ``root``: each device's files, reached through class/infiniband like the real one."""
    class_dir = root / "class" / "infiniband"
    class_dir.mkdir(parents=True, exist_ok=True)
    for device, files in devices.items():
        where = DEVICE_PATHS.get(device)
        device_dir = root / where if where else class_dir / device
        device_dir.mkdir(parents=True, exist_ok=True)
        if where:
            (class_dir / device).symlink_to(Path("..", "..", where))
        for relative, value in files.items():
            path = device_dir / relative
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(value + "\n")
    return root


def port_dir(root: Path, device: str, port: int = 1) -> Path:
    return root / "class" / "infiniband" / device / "ports" / str(port)


def counters(**values: int) -> tuple[tuple[str, int], ...]:
    """Expected counters, in PORT_COUNTERS order."""
    return tuple((name, values[name]) for name in PORT_COUNTERS if name in values)


def by_label(ports: tuple[PortSample, ...]) -> dict[str, PortSample]:
    return {port.label: port for port in ports}


@pytest.fixture
def cx6(tmp_path: Path) -> Path:
    """A ConnectX-6 HDR host: mlx5_0 in RoCE mode, mlx5_1 on the InfiniBand fabric."""
    return build(tmp_path, {"mlx5_1": MLX5_1_IB, "mlx5_0": MLX5_0_ROCE})


def root_ignores_permissions() -> bool:
    return hasattr(os, "geteuid") and os.geteuid() == 0


# ------------------------------------------------------------------ real hosts


def test_an_hdr_host_gives_one_sample_per_port_sorted(cx6: Path):
    roce, ib = read_ports(cx6)

    assert roce == PortSample(
        device="mlx5_0",
        port=1,
        state="ACTIVE",
        phys_state="LinkUp",
        rate_gbps=200.0,
        link_layer="Ethernet",
        # its PMA counters all 0; the driver's hw_counters/ the two NVSentinel reads (procfs-mlx5's real values)
        counters=counters(**dict.fromkeys(PMA_COUNTERS, 0), rnr_nak_retry_err=0, local_ack_timeout_err=131),
    )
    assert (ib.device, ib.port, ib.state, ib.phys_state, ib.rate_gbps, ib.link_layer) == (
        "mlx5_1",
        1,
        "ACTIVE",
        "LinkUp",
        200.0,
        "InfiniBand",
    )
    assert ib.node is None  # this daemon's own host


def test_saturated_counters_are_read_as_they_stand(cx6: Path):
    ib = by_label(read_ports(cx6))["mlx5_1 port 1"]

    assert ib.counters == counters(
        symbol_error=0,
        link_downed=255,
        link_error_recovery=0,
        port_rcv_errors=0,
        port_xmit_discards=65535,
        excessive_buffer_overrun_errors=15,
        local_link_integrity_errors=0,
        port_rcv_remote_physical_errors=0,
    )
    stuck = {name for name, value in ib.counters if value == COUNTER_MAX[name]}
    assert stuck == {"link_downed", "port_xmit_discards", "excessive_buffer_overrun_errors"}
    assert ib.counter("port_xmit_data") is None  # 64-bit data counters are not error counters


def test_counter_max_holds_the_pma_widths_of_every_contract_counter():
    assert set(COUNTER_MAX) == set(PMA_COUNTERS)  # hw_counters/ are the driver's 64-bit statistics
    assert COUNTER_MAX["symbol_error"] == COUNTER_MAX["port_rcv_errors"] == 65535
    assert COUNTER_MAX["port_xmit_discards"] == COUNTER_MAX["port_rcv_remote_physical_errors"] == 65535
    assert COUNTER_MAX["link_downed"] == COUNTER_MAX["link_error_recovery"] == 255
    assert COUNTER_MAX["local_link_integrity_errors"] == COUNTER_MAX["excessive_buffer_overrun_errors"] == 15


def test_down_ports_say_why(tmp_path: Path):
    root = build(tmp_path, {"mlx5_2": MLX5_2_DISABLED, "mlx5_10": MLX5_10_POLLING})

    polling, disabled = read_ports(root)  # "mlx5_10" < "mlx5_2": plain name order

    assert (polling.device, polling.state, polling.phys_state, polling.rate_gbps, polling.link_layer) == (
        "mlx5_10",
        "DOWN",
        "Polling",
        10.0,
        "InfiniBand",
    )
    assert (disabled.device, disabled.state, disabled.phys_state, disabled.link_layer) == (
        "mlx5_2",
        "DOWN",
        "Disabled",
        "Ethernet",
    )
    assert polling.counters == disabled.counters == ()  # no counters/ in the paste: none invented


def test_ports_sort_by_device_then_port_number(tmp_path: Path):
    root = build(tmp_path, {"mlx5_1": MLX5_1_IB, "mlx4_0": MLX4_0, "mlx5_0": MLX5_0_ROCE})

    assert [port.key for port in read_ports(root)] == [
        (None, "mlx4_0", 1),
        (None, "mlx4_0", 2),
        (None, "mlx5_0", 1),
        (None, "mlx5_1", 1),
    ]
    assert {port.rate_gbps for port in read_ports(root) if port.device == "mlx4_0"} == {40.0}


def test_no_pma_counters_are_absent_not_zero(tmp_path: Path):
    (i40iw,) = read_ports(build(tmp_path, {"i40iw0": I40IW0}))

    assert i40iw.counters == ()
    assert i40iw.state is i40iw.rate_gbps is i40iw.link_layer is None  # not in the paste


def test_a_counter_only_in_hw_counters_is_taken_from_there(tmp_path: Path):
    (rxe,) = read_ports(build(tmp_path, {"rxe0": RXE0}))

    assert rxe.counters == (("link_downed", 0),)
    assert (rxe.rate_gbps, rxe.link_layer) == (2.5, "Ethernet")


def test_counters_win_over_hw_counters_and_no_pma_falls_through(tmp_path: Path):
    files = {
        **I40IW0,
        "ports/1/counters/symbol_error": "7",
        "ports/1/hw_counters/symbol_error": "9",
        "ports/1/hw_counters/link_downed": "3",
    }
    (port,) = read_ports(build(tmp_path, {"i40iw0": files}))

    assert port.counters == counters(symbol_error=7, link_downed=3)


# ------------------------------------------------------------------ broken trees


def test_missing_empty_and_garbage_files_leave_their_field_out(cx6: Path):
    ib = port_dir(cx6, "mlx5_1")
    (ib / "state").unlink()
    (ib / "phys_state").write_text("")
    (ib / "rate").write_text("garbage\n")
    (ib / "link_layer").write_text("\n")
    (ib / "counters" / "symbol_error").unlink()
    (ib / "counters" / "link_downed").write_text("")
    (ib / "counters" / "port_rcv_errors").write_text("-1\n")
    (ib / "counters" / "port_xmit_discards").write_text("12abc\n")

    port = by_label(read_ports(cx6))["mlx5_1 port 1"]

    assert (port.state, port.phys_state, port.rate_gbps, port.link_layer) == (None, None, None, None)
    assert port.counters == counters(
        link_error_recovery=0,
        excessive_buffer_overrun_errors=15,
        local_link_integrity_errors=0,
        port_rcv_remote_physical_errors=0,
    )


@pytest.mark.skipif(root_ignores_permissions(), reason="root reads files whatever their mode")
def test_unreadable_files_and_directories_are_skipped(cx6: Path):
    ib = port_dir(cx6, "mlx5_1")
    locked = [ib / "state", ib / "counters" / "port_xmit_discards", ib / "hw_counters"]
    (ib / "hw_counters").mkdir()
    roce_ports = cx6 / DEVICE_PATHS["mlx5_0"] / "ports"
    locked.append(roce_ports)
    try:
        for path in locked:
            path.chmod(0)
        (port,) = read_ports(cx6)  # mlx5_0's ports cannot be listed: that device is left out
    finally:
        for path in locked:
            path.chmod(0o755)

    assert (port.device, port.state, port.phys_state) == ("mlx5_1", None, "LinkUp")
    assert port.counter("port_xmit_discards") is None
    assert port.counter("link_downed") == 255


def test_permission_errors_are_skipped_even_as_root(cx6: Path, monkeypatch: pytest.MonkeyPatch):
    """The same as above where chmod cannot lock root out: the errors are raised by hand."""
    ib = port_dir(cx6, "mlx5_1")
    denied_files = {ib / "state", ib / "counters" / "port_xmit_discards"}
    denied_dir = cx6 / DEVICE_PATHS["mlx5_0"] / "ports"
    real_open, real_scandir = Path.open, os.scandir

    def guarded_open(path: Path, *args, **kwargs):
        if path.resolve() in {p.resolve() for p in denied_files}:
            raise PermissionError(13, "Permission denied", str(path))
        return real_open(path, *args, **kwargs)

    def guarded_scandir(path=".", /):
        if Path(path).resolve() == denied_dir.resolve():
            raise PermissionError(13, "Permission denied", str(path))
        return real_scandir(path)

    monkeypatch.setattr(Path, "open", guarded_open)
    monkeypatch.setattr(os, "scandir", guarded_scandir)
    (port,) = read_ports(cx6)

    assert (port.device, port.state, port.phys_state) == ("mlx5_1", None, "LinkUp")
    assert port.counter("port_xmit_discards") is None and port.counter("link_downed") == 255


def test_devices_without_ports_and_stray_entries_are_ignored(cx6: Path):
    class_dir = cx6 / "class" / "infiniband"
    (class_dir / "registering").mkdir()  # a device with no ports/ yet
    (class_dir / "flat").mkdir()
    (class_dir / "flat" / "ports").write_text("1\n")  # ports/ that is a file
    (class_dir / "mlx5_1" / "ports" / "lost+found").mkdir()  # not a port number
    (class_dir / "mlx5_1" / "ports" / "2").write_text("")  # a file where a port directory would be
    (class_dir / "README").write_text("not a device\n")
    (class_dir / "mlx5_9").symlink_to(Path("..", "..", "devices", "gone", "mlx5_9"))  # dangling

    assert [port.label for port in read_ports(cx6)] == ["mlx5_0 port 1", "mlx5_1 port 1"]


def test_no_infiniband_class_means_no_ports(tmp_path: Path):
    (tmp_path / "class" / "net").mkdir(parents=True)
    (tmp_path / "a_file").write_text("x")

    assert read_ports(tmp_path) == ()
    assert read_ports(tmp_path / "absent") == ()
    assert read_ports(tmp_path / "a_file") == ()
    assert read_ports(str(tmp_path)) == ()


def test_reads_are_bounded(cx6: Path):
    ib = port_dir(cx6, "mlx5_1")
    (ib / "counters" / "symbol_error").write_text("9" * 1_000_000)
    (ib / "rate").write_text("200" + "0" * 1_000_000 + " Gb/sec (4X HDR)\n")

    port = by_label(read_ports(cx6))["mlx5_1 port 1"]

    assert port.counter("symbol_error") is None  # 256 nines are past any 64-bit counter
    assert port.rate_gbps is None  # the unit lies past the bound
    assert MAX_READ_BYTES <= 4096


# ------------------------------------------------------------------ parsing


@pytest.mark.parametrize(
    ("text", "name"),
    [
        ("4: ACTIVE\n", "ACTIVE"),
        ("1: DOWN\n", "DOWN"),
        ("2: INIT\n", "INIT"),
        ("5: LinkUp\n", "LinkUp"),
        ("3: Disabled\n", "Disabled"),
        ("2: Polling\n", "Polling"),
        ("4: PortConfigurationTraining\n", "PortConfigurationTraining"),
        ("7: Phy Test\n", "Phy Test"),
        ("9: <unknown>\n", "<unknown>"),
        ("ACTIVE\n", None),
        ("4:\n", None),
        ("", None),
        ("\x00\x01\n", None),
    ],
)
def test_parse_state(text: str, name: str | None):
    assert parse_state(text) == name


@pytest.mark.parametrize(
    ("text", "gbps"),
    [
        ("200 Gb/sec (4X HDR)\n", 200.0),
        ("100 Gb/sec (2X HDR)\n", 100.0),
        ("400 Gb/sec (4X NDR)\n", 400.0),
        ("100 Gb/sec (4X EDR)\n", 100.0),
        ("25 Gb/sec (1X EDR)\n", 25.0),
        ("40 Gb/sec (4X QDR)\n", 40.0),
        ("2.5 Gb/sec (1X SDR)\n", 2.5),
        ("10 Gb/sec (4X)\n", 10.0),
        ("Gb/sec\n", None),
        ("200\n", None),
        ("fast\n", None),
        ("", None),
    ],
)
def test_parse_rate(text: str, gbps: float | None):
    assert parse_rate(text) == gbps


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("0\n", 0),
        ("65535\n", 65535),
        ("4294967295\n", 4294967295),
        ("205143497464492\n", 205143497464492),
        ("18446744073709551615\n", 2**64 - 1),
        ("18446744073709551616\n", None),
        ("N/A (no PMA)\n", None),
        ("", None),
        ("-1\n", None),
        ("1.5\n", None),
        ("\u0663\n", None),  # a digit, but not an ASCII one
    ],
)
def test_parse_counter(text: str, value: int | None):
    assert parse_counter(text) == value


@pytest.mark.parametrize(
    ("text", "layer"),
    [("InfiniBand\n", "InfiniBand"), ("Ethernet\n", "Ethernet"), ("Unknown\n", "Unknown"), ("", None), ("a b\n", None)],
)
def test_parse_link_layer(text: str, layer: str | None):
    assert parse_link_layer(text) == layer


# ------------------------------------------------------------------ the collector


def test_the_collector_returns_the_ports(cx6: Path):
    collector = InfinibandCollector(sysfs_root=str(cx6))
    assert isinstance(collector, Collector) and collector.name == "infiniband"
    assert "class/infiniband" in collector.describe()

    collected = collector.collect(now=1000.0)
    collector.close()

    assert collected.ports == read_ports(cx6)
    assert collected.gpus is collected.host is None


def test_the_collector_on_a_host_without_infiniband(tmp_path: Path):
    collected = InfinibandCollector(sysfs_root=str(tmp_path)).collect(now=0.0)
    assert collected.ports == ()
