"""``scripts/gpu-check --fake``: the real-GPU acceptance script, run end to end against the fake NVML."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from trainpulse_otel.samples import GpuSample

SCRIPTS = Path(__file__).resolve().parent.parent / "scripts"
spec = importlib.util.spec_from_file_location("gpu_check", SCRIPTS / "gpu_check.py")
gpu_check = importlib.util.module_from_spec(spec)
sys.modules["gpu_check"] = gpu_check  # its dataclasses look their module up
spec.loader.exec_module(gpu_check)

H100 = GpuSample(
    index=0, uuid="GPU-1", name="NVIDIA H100 80GB HBM3", utilization_percent=97.0, memory_utilization_percent=41.0,
    memory_used_bytes=71_303_168_000, memory_total_bytes=85_520_809_984, temperature_celsius=64.0,
    power_watts=612.345, power_limit_watts=700.0, sm_clock_mhz=1980.0, max_sm_clock_mhz=1980.0,
    throttle_reasons=(), ecc_uncorrected_errors=0, ecc_corrected_errors=None,
)  # fmt: skip


@pytest.mark.e2e
def test_the_fake_machine_passes_every_check_and_the_table_says_so():
    done = subprocess.run([str(SCRIPTS / "gpu-check"), "--fake", "--json"], capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stdout + done.stderr
    rows = json.loads(done.stdout.splitlines()[-1])["rows"]
    assert {r["check"] for r in rows} == {"nvml=smi", "ecc/remap", "xid", "mfu", "daemon", "top"}
    assert [r for r in rows if r["verdict"] == "FAIL"] == []
    pending = next(r for r in rows if r["item"] == "GPU 1 remapped_rows_pending")
    assert pending["seen"] == "1" and pending["verdict"] == "ok"  # the fake's second GPU has a remap pending


def test_a_field_the_two_tools_disagree_on_fails_within_its_resolution_only():
    same = {r.item: r.verdict for r in gpu_check.compare(H100, replace(H100, power_watts=612.35))}
    assert set(same.values()) <= {"ok", "skip"}
    off = {r.item: r.verdict for r in gpu_check.compare(H100, replace(H100, memory_total_bytes=80 << 30, name="x"))}
    assert off["GPU 0 memory_total_bytes"] == off["GPU 0 name"] == "FAIL"
    assert off["GPU 0 ecc_corrected_errors"] == "ok"  # unknown to both: the documented fallback
    one_sided = {r.item: r.verdict for r in gpu_check.compare(H100, replace(H100, temperature_celsius=None))}
    assert one_sided["GPU 0 temperature_celsius"] == "FAIL"
