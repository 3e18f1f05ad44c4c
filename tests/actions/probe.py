"""A real action for the tests: a tiny Python script that records what it was told, and can hang."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

#: ``probe.py OUT [SLEEP_S]``: appends one line (the stdin JSON, the TRAINPULSE_* environment, its pid) to OUT;
#: with SLEEP_S it starts a child that sleeps as long, writes the child's pid too, and sleeps itself.
SCRIPT = """
import json, os, subprocess, sys, time
told = json.load(sys.stdin)
env = {k: v for k, v in os.environ.items() if k.startswith("TRAINPULSE_") and k != "TRAINPULSE_DISABLE_PLUGIN_AUTOLOAD"}
line = {"stdin": told, "env": env, "pid": os.getpid()}
sleep = float(sys.argv[2]) if len(sys.argv) > 2 else 0.0
if sleep:
    child = subprocess.Popen([sys.executable, "-c", f"import time; time.sleep({sleep})"])
    line["child"] = child.pid
with open(sys.argv[1], "a") as fh:
    fh.write(json.dumps(line) + "\\n")
time.sleep(sleep)
"""


def probe(tmp_path: Path, sleep_s: float = 0.0) -> tuple[list[str], Path]:
    """The argv of a probe action writing to a file in ``tmp_path``, and that file."""
    script = tmp_path / "probe.py"
    script.write_text(SCRIPT)
    out = tmp_path / "told.jsonl"
    argv = [sys.executable, str(script), str(out)] + ([str(sleep_s)] if sleep_s else [])
    return argv, out


def told(out: Path) -> list[dict[str, Any]]:
    """What the probe recorded, one entry per run."""
    return [json.loads(line) for line in out.read_text().splitlines()] if out.exists() else []
