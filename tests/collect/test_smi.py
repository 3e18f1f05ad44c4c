"""SmiCollector: parsing recorded output, and running a fake nvidia-smi on PATH."""

from __future__ import annotations

import logging
import os
import stat
import time
from pathlib import Path

import psutil
import pytest

from trainpulse_otel.collect import smi
from trainpulse_otel.collect.base import Collector
from trainpulse_otel.collect.smi import (
    EVENT_REASONS_FIELD,
    THROTTLE_REASONS_FIELD,
    SmiCollector,
    parse_query_output,
    query_command,
)
from trainpulse_otel.samples import GpuSample

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "nvidia_smi"
MIB = 1024 * 1024
SMI_LOGGER = "trainpulse_otel.collect.smi"


def fixture(name: str) -> str:
    return (FIXTURES / name).read_text()


def parse(name: str) -> tuple[tuple[GpuSample, ...], list[tuple[int, str, str]]]:
    errors: list[tuple[int, str, str]] = []
    samples = parse_query_output(fixture(name), on_error=lambda *e: errors.append(e))
    return samples, errors


def smi_logs(caplog, text: str) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.name == SMI_LOGGER and text in r.getMessage()]


# ---------------------------------------------------------------- parsing


def test_healthy_h100_box_parses_every_field_with_units():
    gpus, errors = parse("h100_sxm_8x_healthy.csv")
    assert errors == []
    assert [g.index for g in gpus] == list(range(8))
    assert gpus[0] == GpuSample(
        index=0,
        uuid="GPU-6513270e-269e-4d37-b2a7-4de452e6b438",
        name="NVIDIA H100 80GB HBM3",
        utilization_percent=100.0,
        memory_utilization_percent=47.0,
        memory_used_bytes=76212 * MIB,
        memory_total_bytes=81559 * MIB,
        temperature_celsius=58.0,
        power_watts=662.41,
        power_limit_watts=700.0,
        sm_clock_mhz=1980.0,
        max_sm_clock_mhz=1980.0,
        throttle_reasons=(),
        ecc_uncorrected_errors=0,
    )
    assert len({g.uuid for g in gpus}) == 8
    assert all(g.throttle_reasons == () and g.power_watts < g.power_limit_watts for g in gpus)


def test_throttled_box_decodes_the_reasons_mask():
    gpus, errors = parse("h100_sxm_8x_throttled.csv")
    assert errors == []
    reasons = {g.index: g.throttle_reasons for g in gpus}
    assert reasons == {
        0: (),
        1: (),
        2: (),
        4: (),
        3: ("hw_slowdown", "hw_thermal"),
        5: ("sw_power_cap",),
        6: ("sw_thermal",),
        7: ("gpu_idle",),
    }
    hot = gpus[3]
    assert (hot.temperature_celsius, hot.sm_clock_mhz, hot.max_sm_clock_mhz) == (87.0, 1395.0, 1980.0)


def test_lost_gpu_line_is_skipped_and_the_rest_flow():
    gpus, errors = parse("h100_sxm_8x_gpu_lost.csv")
    assert [g.index for g in gpus] == [0, 1, 3, 4, 5, 6, 7]
    assert [(line, column) for line, column, _ in errors] == [(3, "row")]
    assert "expected 14 or 17 values, got 1" in errors[0][2]
    assert gpus[4].index == 5 and gpus[4].power_watts is None  # [Unknown Error]
    assert gpus[4].power_limit_watts == 700.0


def test_mig_mode_utilization_is_unknown_not_zero():
    gpus, errors = parse("a100_sxm4_4x_mig.csv")
    assert errors == []
    assert [(g.utilization_percent, g.memory_utilization_percent) for g in gpus] == [
        (None, None),
        (None, None),
        (100.0, 62.0),
        (0.0, 0.0),
    ]
    assert gpus[0].memory_used_bytes == 39812 * MIB and gpus[0].ecc_uncorrected_errors == 0
    assert gpus[3].throttle_reasons == ("gpu_idle",)


def test_consumer_cards_without_ecc_or_power_readings():
    gpus, errors = parse("geforce_consumer.csv")
    assert errors == []
    desktop, laptop = gpus
    assert desktop.ecc_uncorrected_errors is None and desktop.power_watts == 431.27
    assert laptop.name == "NVIDIA GeForce RTX 3060 Laptop GPU"
    assert (laptop.power_watts, laptop.power_limit_watts, laptop.ecc_uncorrected_errors) == (None, None, None)
    assert laptop.memory_total_bytes == 6144 * MIB and laptop.max_sm_clock_mhz == 2100.0


def test_older_drivers_output_parses_the_same():
    v100, errors = parse("v100_driver470_throttle_field.csv")
    assert errors == []
    assert [g.throttle_reasons for g in v100] == [(), ("sw_power_cap",), ("gpu_idle",), ("gpu_idle",)]
    assert [g.ecc_uncorrected_errors for g in v100] == [0, 0, 0, 2]
    (gtx,), errors = parse("geforce_gtx1080ti_driver418.csv")
    assert errors == []
    assert gtx.name == "GeForce GTX 1080 Ti" and gtx.ecc_uncorrected_errors is None


@pytest.mark.parametrize(
    "marker", ["[N/A]", "N/A", "[Not Supported]", "[Unknown Error]", "", " [Insufficient Permissions] "]
)
def test_no_value_markers_become_none(marker):
    line = f"0, GPU-x, NVIDIA H100 80GB HBM3, {marker}, 1, 2, 3, 4, 5, 6, 7, 8, 0x4, {marker}\n"
    (gpu,) = parse_query_output(line, on_error=lambda *e: pytest.fail(str(e)))
    assert gpu.utilization_percent is None and gpu.ecc_uncorrected_errors is None
    assert gpu.memory_utilization_percent == 1.0 and gpu.throttle_reasons == ("sw_power_cap",)


def test_a_bad_value_is_none_and_reported_but_keeps_the_gpu():
    errors = []
    text = "0, GPU-x, H100, busy, 1, 2, 3, nan, 5, 6, 7, 8, 0xZZ, 0\n"
    (gpu,) = parse_query_output(text, on_error=lambda *e: errors.append(e))
    assert (gpu.utilization_percent, gpu.temperature_celsius, gpu.throttle_reasons) == (None, None, None)
    assert gpu.memory_used_bytes == 2 * MIB
    assert [(line, col) for line, col, _ in errors] == [
        (1, "utilization_percent"),
        (1, "temperature_celsius"),
        (1, "throttle_reasons"),
    ]


def test_bad_index_duplicates_and_blank_lines():
    good = "1, GPU-b, H100, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0x0, 0"
    text = "\n".join(
        [
            "x, GPU-a, H100, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0x0, 0",
            "",
            good,
            "[N/A], GPU-c, H100, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0x0, 0",
            good.replace("GPU-b", "GPU-dup"),
            "0, GPU-z, H100, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0x0, 0",
        ]
    )
    errors = []
    gpus = parse_query_output(text, on_error=lambda *e: errors.append(e))
    assert [(g.index, g.uuid) for g in gpus] == [(0, "GPU-z"), (1, "GPU-b")]
    assert [(line, col) for line, col, _ in errors] == [(1, "index"), (4, "index"), (5, "index")]


def test_default_error_handler_logs(caplog):
    caplog.set_level(logging.WARNING)
    assert parse_query_output("garbage\n") == ()
    assert len(smi_logs(caplog, "line 1")) == 1


def test_query_command_asks_for_the_contract_fields():
    argv = query_command("nvidia-smi")
    assert argv[0] == "nvidia-smi" and argv[2] == "--format=csv,noheader,nounits"
    fields = argv[1].removeprefix("--query-gpu=").split(",")
    assert len(fields) == 14 and fields[12] == EVENT_REASONS_FIELD
    assert fields[:3] == ["index", "uuid", "name"] and "clocks.max.sm" in fields
    assert query_command("smi", THROTTLE_REASONS_FIELD)[1].count(THROTTLE_REASONS_FIELD) == 1


# ------------------------------------------------------ fake nvidia-smi


@pytest.fixture
def fake_smi(tmp_path, monkeypatch):
    """Write a shell script as ``nvidia-smi`` first on PATH; returns its log file.

    The script appends its arguments to ``calls.log`` before running ``body``.
    """
    bindir = tmp_path / "bin"
    bindir.mkdir()
    calls = tmp_path / "calls.log"
    monkeypatch.setenv("PATH", f"{bindir}{os.pathsep}{os.environ.get('PATH', '')}")

    def write(body: str) -> Path:
        script = bindir / "nvidia-smi"
        script.write_text(f'#!/bin/sh\necho "$@" >> "{calls}"\n{body}\n')
        script.chmod(script.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
        return calls

    return write


def call_lines(calls: Path) -> list[str]:
    return calls.read_text().splitlines() if calls.exists() else []


def test_end_to_end_with_a_script_that_prints_a_fixture(fake_smi):
    calls = fake_smi(f'cat "{FIXTURES / "h100_sxm_8x_throttled.csv"}"')
    collector = SmiCollector()
    assert isinstance(collector, Collector) and collector.name == "nvidia-smi"

    result = collector.collect(now=1.0)

    assert result.host is None and result.training is None
    assert result.gpus == parse_query_output(fixture("h100_sxm_8x_throttled.csv"))
    (argv,) = call_lines(calls)
    assert f"{EVENT_REASONS_FIELD}," in argv and "--format=csv,noheader,nounits" in argv


def test_old_driver_switches_to_the_throttle_field_once(fake_smi, caplog):
    calls = fake_smi(
        'case "$*" in *clocks_event_reasons*) '
        f'cat "{FIXTURES / "old_driver_invalid_field.txt"}"; exit 2;; esac\n'
        f'cat "{FIXTURES / "v100_driver470_throttle_field.csv"}"'
    )
    caplog.set_level(logging.INFO)
    collector = SmiCollector()

    results = [collector.collect(now=float(i)) for i in range(3)]

    assert all(len(r.gpus) == 4 for r in results)
    assert results[0].gpus[1].throttle_reasons == ("sw_power_cap",)
    argvs = call_lines(calls)
    assert len(argvs) == 4  # one refused query, then one per tick
    assert EVENT_REASONS_FIELD in argvs[0]
    assert all(THROTTLE_REASONS_FIELD in a for a in argvs[1:])
    assert len(smi_logs(caplog, "predates clock events")) == 1
    assert smi_logs(caplog, "exited") == []


def test_hung_nvidia_smi_is_killed_and_the_tick_has_no_gpus(fake_smi, tmp_path, caplog):
    pids = tmp_path / "pids"
    fake_smi(f'echo $$ >> "{pids}"\nsleep 30 &\necho $! >> "{pids}"\nwait')
    caplog.set_level(logging.INFO)
    collector = SmiCollector(timeout=0.5)

    for i in range(2):
        started = time.monotonic()
        assert collector.collect(now=float(i)).gpus == ()
        assert time.monotonic() - started < 0.5 + 1.0

    assert len(smi_logs(caplog, "no answer in 0.5s")) == 1  # once per episode
    for pid in map(int, pids.read_text().split()):  # the script and its sleep child
        assert _gone(pid), f"process {pid} survived the timeout"


def _gone(pid: int, wait_s: float = 2.0) -> bool:
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        try:
            if psutil.Process(pid).status() == psutil.STATUS_ZOMBIE:
                return True
        except psutil.NoSuchProcess:
            return True
        time.sleep(0.05)
    return False


def test_recovers_after_a_hang_and_says_so(fake_smi, tmp_path, caplog):
    flag = tmp_path / "hung-once"
    fake_smi(
        f'if [ ! -e "{flag}" ]; then touch "{flag}"; exec sleep 30; fi\ncat "{FIXTURES / "h100_sxm_8x_healthy.csv"}"'
    )
    caplog.set_level(logging.INFO)
    collector = SmiCollector(timeout=0.5)
    assert collector.collect(now=0.0).gpus == ()
    assert len(collector.collect(now=1.0).gpus) == 8
    assert len(smi_logs(caplog, "answers again")) == 1


def test_no_second_nvidia_smi_while_a_killed_one_is_still_alive(fake_smi, tmp_path, monkeypatch):
    """A process stuck in the driver ignores SIGKILL; simulate one that is slow to die."""
    flag = tmp_path / "slow-once"
    calls = fake_smi(
        f'if [ ! -e "{flag}" ]; then touch "{flag}"; exec sleep 1; fi\ncat "{FIXTURES / "h100_sxm_8x_healthy.csv"}"'
    )
    monkeypatch.setattr(smi, "_kill", lambda proc: proc)  # "killed", but still running
    collector = SmiCollector(timeout=0.2)

    assert collector.collect(now=0.0).gpus == ()
    assert collector.collect(now=1.0).gpus == ()
    assert len(call_lines(calls)) == 1  # the stuck one blocks a second start

    time.sleep(1.2)  # the stuck one finally exits
    assert len(collector.collect(now=2.0).gpus) == 8
    assert len(call_lines(calls)) == 2
    collector.close()


def test_nonzero_exit_keeps_the_rows_it_printed_and_logs_once(fake_smi, caplog):
    fake_smi(f'cat "{FIXTURES / "h100_sxm_8x_gpu_lost.csv"}"\nexit 15')
    caplog.set_level(logging.INFO)
    collector = SmiCollector()
    results = [collector.collect(now=float(i)) for i in range(3)]
    assert all([g.index for g in r.gpus] == [0, 1, 3, 4, 5, 6, 7] for r in results)
    assert len(smi_logs(caplog, "exited with 15")) == 1
    assert len(smi_logs(caplog, "line 3, row")) == 1


def test_missing_binary_is_no_gpus_logged_once(tmp_path, caplog):
    caplog.set_level(logging.INFO)
    collector = SmiCollector(binary=str(tmp_path / "no-such-nvidia-smi"))
    assert [collector.collect(now=float(i)).gpus for i in range(3)] == [(), (), ()]
    assert len(smi_logs(caplog, "cannot run")) == 1


def test_available_only_when_it_runs_and_lists_a_gpu(fake_smi, tmp_path, monkeypatch):
    fake_smi("echo 0; echo 1")
    assert SmiCollector.available() is True

    fake_smi(
        "echo \"NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA "
        'driver. Make sure that the latest NVIDIA driver is installed and running."; exit 9'
    )
    assert SmiCollector.available() is False

    fake_smi("exec sleep 30")
    started = time.monotonic()
    assert SmiCollector.available(timeout=0.3) is False
    assert time.monotonic() - started < 1.3

    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    assert SmiCollector.available() is False


# ------------------------------------------------------- memory faults


def test_memory_fault_columns_are_read_when_present():
    gpus, errors = parse("h100_sxm_8x_memory_faults.csv")
    assert errors == []
    assert [(g.ecc_corrected_errors, g.remapped_rows_pending, g.remapped_rows_failed) for g in gpus][2:7] == [
        (0, 0, 0),
        (2, 0, 0),
        (0, 0, 0),
        (0, 0, 0),
        (1843, 1, 0),
    ]
    assert "ecc.errors.corrected.volatile.total" in query_command(faults=True)[1]
    assert "remapped_rows" not in query_command()[1]


def test_a_driver_without_the_fault_fields_is_asked_without_them_once(fake_smi, caplog):
    calls = fake_smi(
        'case "$*" in *remapped_rows*) '
        f'cat "{FIXTURES / "driver_without_remapped_rows.txt"}"; exit 2;; esac\n'
        f'cat "{FIXTURES / "h100_sxm_8x_healthy.csv"}"'
    )
    caplog.set_level(logging.INFO)
    collector = SmiCollector()
    results = [collector.collect(now=float(i)) for i in range(3)]
    assert all(len(r.gpus) == 8 and r.gpus[0].ecc_corrected_errors is None for r in results)
    argvs = call_lines(calls)
    assert len(argvs) == 4 and "remapped_rows" in argvs[0]
    assert not any("remapped_rows" in a for a in argvs[1:])
    assert len(smi_logs(caplog, "does not know")) == 1


def test_xids_come_from_the_kernel_log_by_pci_bus_id_and_a_lost_gpu_keeps_its_xid_79(fake_smi, tmp_path):
    from trainpulse_otel.collect.kmsg import KernelXidLog

    calls = fake_smi(
        f'case "$*" in *pci.bus_id*) cat "{FIXTURES / "h100_sxm_8x_bus_ids.csv"}"; exit 0;; esac\n'
        f'cat "{FIXTURES / "h100_sxm_8x_gpu_lost.csv"}"'
    )
    kmsg = tmp_path / "kmsg"
    kmsg.write_text("")
    collector = SmiCollector(kernel_log=lambda: KernelXidLog(str(kmsg)))
    first = collector.collect(now=1.0).gpus
    kmsg.write_text((FIXTURES.parent / "kernel_log" / "dmesg_xid.txt").read_text())
    second = collector.collect(now=2.0).gpus
    third = collector.collect(now=3.0).gpus

    assert [g.xid_errors for g in first] == [()] * 7
    assert {g.index: g.xid_errors for g in second if g.xid_errors} == {
        0: (13,),
        1: (48, 74),
        2: (79,),
        4: (119,),
        7: (63, 94),
    }
    lost = next(g for g in second if g.index == 2)
    assert lost.utilization_percent is None  # not in nvidia-smi's rows: only its XID
    assert [g.index for g in third] == [0, 1, 3, 4, 5, 6, 7] and all(g.xid_errors == () for g in third)
    assert sum("pci.bus_id" in a for a in call_lines(calls)) == 1  # asked once
