"""The report of a job restarted from its checkpoint: its attempts on the timeline and in the goodput section,
with what the restart cost, the checkpoints seen and the interval to save at."""

from __future__ import annotations

import re
import time
from pathlib import Path

from trainpulse_otel.cli import main

T0 = 1_764_400_000.0


def stamp(t: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(T0 + t)) + f",{int((t % 1) * 1000):03d}"


def restart_line(t: float) -> str:
    """torchrun's agent at ``LOGLEVEL=INFO``, glog-stamped (PyTorch 2.3+)."""
    when = time.strftime("%m%d %H:%M:%S", time.gmtime(T0 + t))
    return (
        f"I{when}.000000 40987 torch/distributed/elastic/agent/server/api.py:942] [default] Worker group FAILED. "
        "1/1 attempts left; will restart worker group"
    )


def restarted_log(path: Path) -> Path:
    """Steps of 1 s from 1 to 60, a save of 2 s (torchtitan's words) every 20; killed after step 50; torchrun
    restarts it and the new attempt loads step 40's checkpoint in 5 s and goes on from 41 to 90."""
    lines, t = [], 0.0
    for step in range(1, 51):
        t += 1.0
        lines.append(f"[{stamp(t)}] step {step} | loss 2.5000 | step_time 1.000s")
        if step % 20 == 0:
            t += 2.0
            lines.append(f"[{stamp(t)}] Finished saving the checkpoint in 2.00 seconds.")
    lines.append(restart_line(t + 1.0))
    t += 20.0
    lines.append(f"[{stamp(t)}] Finished loading the checkpoint in 5.00 seconds.")
    for step in range(41, 91):
        t += 1.0
        lines.append(f"[{stamp(t)}] step {step} | loss 2.4000 | step_time 1.000s")
        if step % 20 == 0:
            t += 2.0
            lines.append(f"[{stamp(t)}] Finished saving the checkpoint in 2.00 seconds.")
    path.write_text("\n".join(lines) + "\n")
    return path


def test_the_page_of_a_restarted_job_shows_its_attempts_and_what_the_restart_cost(tmp_path):
    page_path = tmp_path / "report.html"
    assert main(["report", str(restarted_log(tmp_path / "job.log")), "-o", str(page_path)]) == 0
    body = dict(re.findall(r"<section><h2>(.*?)</h2>(.*?)</section>", page_path.read_text(), re.DOTALL))
    goodput = body["Goodput and badput"]
    assert "<h3>The job's life</h3>" in goodput and "1 interruption(s)" in goodput
    rows = re.findall(r"<tr><td>(\d)</td><td>(\d+)</td><td>(\w+)</td><td>([\d–]+)</td><td>(\w*)</td></tr>", goodput)
    assert [(n, steps, why) for n, _, _, steps, why in rows] == [("1", "1–50", "failure"), ("2", "41–90", "")]
    assert rows[1][2] == "running"
    assert "lost progress" in goodput and "checkpoint load 5.0 s" in goodput
    assert "save s 2.0" in goodput and "interval s" in goodput  # the saves the log told, their cadence
    assert "<b>Save every" in goodput and "mtbf_from observed" in goodput  # Daly's interval, with its inputs
    assert "attempt 2" in body["Signals on a timeline"]  # the restart on the timeline, with no signal raised
