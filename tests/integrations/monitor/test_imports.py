"""``import trainpulse_otel`` stays cheap: no torch, transformers, Lightning or OTel SDK until used."""

from __future__ import annotations

import json
import subprocess
import sys

HEAVY = ("torch", "transformers", "lightning", "opentelemetry.sdk")


def loaded_after(code: str) -> dict[str, bool]:
    probe = f"{code}\nimport json, sys\nprint(json.dumps({{m: m in sys.modules for m in {HEAVY!r}}}))"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_package_import_loads_nothing_heavy():
    assert not any(loaded_after("import trainpulse_otel").values())


def test_mfu_and_monitor_never_import_torch_or_frameworks():
    loaded = loaded_after("import trainpulse_otel.mfu\nfrom trainpulse_otel import TrainingMonitor")
    assert not any(loaded.values())  # the OTel SDK too waits for an in-process monitor to start
