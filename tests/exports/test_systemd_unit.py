"""packaging/systemd/trainpulse.service: valid for systemd, and hardened (systemd's own exposure score)."""

from __future__ import annotations

import configparser
import re
import shutil
import subprocess
from pathlib import Path

import pytest

UNIT = Path(__file__).resolve().parents[2] / "packaging" / "systemd" / "trainpulse.service"
ANALYZE = shutil.which("systemd-analyze")
needs_analyze = pytest.mark.skipif(ANALYZE is None, reason="systemd-analyze not installed (no systemd on this machine)")


def service_section() -> dict[str, list[str]]:
    """The [Service] keys, each with every value it is given (systemd allows repeats)."""
    values: dict[str, list[str]] = {}
    section = None
    for line in UNIT.read_text(encoding="utf-8").splitlines():
        if line.startswith("["):
            section = line.strip("[]")
        elif section == "Service" and "=" in line and not line.startswith("#"):
            key, _, value = line.partition("=")
            values.setdefault(key, []).append(value)
    return values


def test_the_daemon_runs_unprivileged_and_sandboxed():
    service = service_section()
    expected = {
        "DynamicUser": "yes",
        "NoNewPrivileges": "yes",
        "ProtectSystem": "strict",
        "ProtectHome": "yes",
        "PrivateTmp": "yes",
        "CapabilityBoundingSet": "",
        "RestrictSUIDSGID": "yes",
        "DevicePolicy": "closed",
    }
    assert {key: service[key][-1] for key in expected} == expected
    assert "trainpulse daemon -config /etc/trainpulse/config.json" in service["ExecStart"][0]
    assert any(value.startswith("char-nvidia-frontend") for value in service["DeviceAllow"])
    assert configparser.ConfigParser(strict=False, interpolation=None).read(UNIT)  # plain INI syntax


@needs_analyze
def test_systemd_accepts_the_unit_and_rates_it_well_hardened(tmp_path):
    unit = tmp_path / "trainpulse.service"  # the real binary is not installed here; everything else is as shipped
    unit.write_text(re.sub(r"(?m)^ExecStart=.*$", "ExecStart=/bin/true", UNIT.read_text(encoding="utf-8")))
    verify = subprocess.run([ANALYZE, "verify", str(unit)], capture_output=True, text=True, timeout=60)
    assert verify.returncode == 0 and verify.stderr.strip() == "", verify.stderr
    security = subprocess.run(
        [ANALYZE, "security", "--offline=yes", "--threshold=20", str(unit)], capture_output=True, text=True, timeout=60
    )
    assert security.returncode == 0, security.stdout[-2000:]  # exposure at most 2.0 of 10 ("OK")
    assert re.search(r"Overall exposure level for trainpulse\.service: [01]\.\d OK", security.stdout)
