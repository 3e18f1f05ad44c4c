"""``trainpulse replay`` of training logs, as users run it: real processes, real files."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import time
import types

from tests.logs.lines import WATCHDOG, iteration
from trainpulse_otel.cli import main
from trainpulse_otel.cli import replay as replay_command

TRAINPULSE = [sys.executable, "-m", "trainpulse_otel"]


def replay(*argv: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TRAINPULSE_", "OTEL_"))}
    return subprocess.run([*TRAINPULSE, "replay", *argv], capture_output=True, text=True, env=env, timeout=120)


def test_several_ranks_logs_are_read_in_time_order_and_a_watchdog_timeout_is_diagnosed(tmp_path):
    stamps = [f"[2024-05-01 10:{s // 60:02d}:{s % 60:02d}] " for s in range(0, 300, 5)]
    (tmp_path / "rank0.log").write_text("".join(iteration(i + 1, stamp) + "\n" for i, stamp in enumerate(stamps)))
    stuck = "[2024-05-01 10:05:10] " + WATCHDOG.replace("[Rank 3]", "[Rank 1]")
    (tmp_path / "rank1.log").write_text("NCCL INFO Bootstrap : Using eth0:10.0.0.2<0>\n" + stuck + "\n")
    proc = replay(str(tmp_path / "rank1.log"), str(tmp_path / "rank0.log"), "-json", "-interval", "5s")
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    [raised] = [e for e in result["timeline"] if e["event"] == "raised" and e["signal"] == "collective_timeout"][:1]
    assert raised["subject"] == {"ranks": [1]} and raised["ts"] == 1714557910.0
    assert result["diagnosis"]["root_causes"][0]["cause"] == "rank_hang"
    said = "read 62 line(s): 60 iteration report(s) (60 by megatron), 1 failure line(s) (1 collective timeout), 1 not"
    assert said in proc.stderr


def test_a_framework_nobody_knows_is_one_line_and_exit_2(tmp_path):
    log = tmp_path / "train.log"
    log.write_text(iteration(1) + "\n")
    proc = replay(str(log), "-framework", "megatorn")
    assert proc.returncode == 2 and proc.stderr.startswith("trainpulse: -framework: unknown framework 'megatorn'")


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_a_long_replay_on_a_terminal_says_how_far_it_got_then_clears_the_line(monkeypatch):
    clock = iter([0.0, 1.0, 3.0, 3.5, 4.6])
    fake_time = types.SimpleNamespace(monotonic=lambda: next(clock), strftime=time.strftime, gmtime=time.gmtime)
    monkeypatch.setattr(replay_command, "time", fake_time)
    monkeypatch.setattr(sys, "stderr", _Terminal())
    progress = replay_command.Progress()  # started at 0 s
    step = types.SimpleNamespace(diagnosis=types.SimpleNamespace(ts=1_764_400_000.0))
    for _ in range(4):  # at 1 s (too soon), 3 s (said), 3.5 s (within the second), 4.6 s (said)
        progress(step)
    progress.done()
    said = sys.stderr.getvalue()
    assert said.count("replaying:") == 2 and "2 ticks" in said and "4 ticks, at 2025-11-29 07:06:40Z" in said
    assert said.endswith("\r\033[K")


def test_no_progress_line_where_stderr_is_no_terminal(capsys, tmp_path):
    log = tmp_path / "train.log"
    log.write_text("\n".join(iteration(step) for step in range(1, 40)) + "\n")
    assert main(["replay", str(log)]) == 0
    assert "replaying" not in capsys.readouterr().err
