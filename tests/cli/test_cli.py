"""The command line, as users run it: real processes, one-line errors, clean shutdown."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request

import pytest

from trainpulse_otel.cli import main
from trainpulse_otel.collect.sim import SimulatedNode
from trainpulse_otel.collect.trace import encode_line

TRAINPULSE = [sys.executable, "-m", "trainpulse_otel"]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _clean_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith(("TRAINPULSE_", "OTEL_"))}


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (["daemon", "-interval", "soon"], "interval"),
        (["daemon", "-mode", "gpu"], "mode"),
        (["snapshot", "-scenario", "volcano"], "scenario"),  # the name is checked at start-up, in every mode
        (["daemon", "-bogus", "1"], "-bogus"),
        (["frobnicate"], "frobnicate"),
    ],
)
def test_bad_input_is_one_line_naming_it_with_exit_2(argv, needle):
    proc = subprocess.run(TRAINPULSE + argv, capture_output=True, text=True, env=_clean_env(), timeout=60)
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and needle in lines[0] and "Traceback" not in proc.stderr


def test_unknown_env_key_is_reported(monkeypatch, capsys):
    monkeypatch.setenv("TRAINPULSE_INTERVALL", "1s")
    assert main(["snapshot", "-mode", "none"]) == 2
    assert "TRAINPULSE_INTERVALL" in capsys.readouterr().err


def test_double_dash_and_equals_forms(capsys, monkeypatch):
    for key in [k for k in os.environ if k.startswith("TRAINPULSE_")]:
        monkeypatch.delenv(key)
    assert main(["snapshot", "--mode=sim", "-interval=1s", "-warmup", "30s", "--scenario", "healthy"]) == 0
    snap = json.loads(capsys.readouterr().out)
    assert snap["mode"] == "sim" and len(snap["gpus"]) == 8


def test_snapshot_sim_prints_the_contract_snapshot():
    proc = subprocess.run(
        [*TRAINPULSE, "snapshot", "-mode", "sim"], capture_output=True, text=True, env=_clean_env(), timeout=120
    )
    assert proc.returncode == 0, proc.stderr
    snap = json.loads(proc.stdout)
    assert [g["index"] for g in snap["gpus"]] == list(range(8))
    assert snap["host"]["cpu_count"] > 0
    training = snap["training"]
    assert len(training["ranks"]) == 8 and {"rank", "gpu_index", "step_time_ms"} <= set(training["ranks"][0])
    assert set(snap["diagnosis"]) == {"health", "signals", "root_causes", "goodput"}


def test_daemon_serves_then_shuts_down_cleanly_on_sigterm(tmp_path):
    port = _free_port()
    trace = tmp_path / "trace.jsonl"
    proc = subprocess.Popen(
        [
            *TRAINPULSE,
            "daemon",
            "-mode",
            "sim",
            "-addr",
            f"127.0.0.1:{port}",
            "-interval",
            "200ms",
            "-record",
            str(trace),
            "-log-format",
            "json",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=_clean_env(),
    )
    try:
        health = _wait_json(f"http://127.0.0.1:{port}/healthz")
        assert health["status"] == "ok" and health["mode"] == "sim"
        first = _wait_until(f"http://127.0.0.1:{port}/v1/snapshot", lambda s: s["training"] is not None)
        assert len(first["gpus"]) == 8
        _wait_until(f"http://127.0.0.1:{port}/v1/snapshot", lambda s: s["timestamp"] > first["timestamp"])
    finally:
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err
    logs = [json.loads(line) for line in err.splitlines() if line.strip()]
    assert any("flushing exporters" in entry["message"] for entry in logs)
    assert trace.read_text().count('"gpus"') >= 2


def _wait_json(url: str, timeout: float = 30.0):
    return _wait_until(url, lambda _: True, timeout)


def _wait_until(url: str, ready, timeout: float = 30.0):
    deadline = time.monotonic() + timeout
    while True:
        try:
            with urllib.request.urlopen(url, timeout=2) as resp:
                body = json.load(resp)
            if ready(body):
                return body
        except OSError:
            pass
        if time.monotonic() > deadline:
            raise AssertionError(f"{url} not ready within {timeout}s")
        time.sleep(0.1)


def test_replay_prints_timeline_and_reports_bad_lines(tmp_path, capsys):
    trace = tmp_path / "t.jsonl"
    trace.write_text('{"ts": 1, "host": {"cpu_percent": 5}}\nnot json\n{"ts": 2, "training": {"step_time_ms": 9}}\n')
    assert main(["replay", str(trace), "-json"]) == 0
    out = capsys.readouterr()
    assert set(json.loads(out.out)) == {"timeline", "diagnosis"}
    assert "line 2" in out.err


def test_a_replay_that_read_no_valid_line_exits_1_saying_so(tmp_path, capsys):
    trace = tmp_path / "t.jsonl"
    trace.write_text('{"ts": 1, "host": {"cpu_percent": "x"}}\n{"ts": "later", "gpus": []}\n')
    assert main(["replay", str(trace), "-json"]) == 1
    out = capsys.readouterr()
    assert out.out == "" and "no valid trace line or known log line in" in out.err


def test_replay_missing_file_is_one_line(capsys, tmp_path):
    assert main(["replay", str(tmp_path / "nope.jsonl")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "cannot read" in err[0]


def test_replay_of_rotated_pieces_equals_replay_of_the_whole(tmp_path, capsys):
    node = SimulatedNode("rank_straggler")
    lines = []
    for t in range(120):
        seen = node.sample(float(t))
        lines += [
            encode_line(1_764_400_000.0 + t, "gpus", seen.gpus),
            encode_line(1_764_400_000.0 + t, "host", seen.host),
        ]
        if seen.training is not None:
            lines.append(encode_line(1_764_400_000.0 + t, "training", seen.training))
    whole, older, newer = tmp_path / "trace.jsonl", tmp_path / "trace.jsonl.1", tmp_path / "trace.jsonl.2"
    whole.write_text("".join(lines))
    older.write_text("".join(lines[:150]))
    newer.write_text("".join(lines[150:]) + "not json\n")
    assert main(["replay", str(whole), "-json"]) == 0
    expected = json.loads(capsys.readouterr().out)
    assert main(["replay", str(older), str(newer), "-json"]) == 0
    out = capsys.readouterr()
    assert json.loads(out.out) == expected
    assert any(e["signal"] == "rank_straggler" for e in expected["timeline"])
    assert out.err.count("trainpulse:") == 1 and str(newer) in out.err


def test_replay_names_the_rank_that_costs_the_most_and_what_of(tmp_path, capsys):
    node, lines = SimulatedNode("rank_straggler"), []
    for t in range(240):
        seen = node.sample(float(t))
        lines += [encode_line(1_764_400_000.0 + t, "gpus", seen.gpus)]
        if seen.training is not None:
            lines.append(encode_line(1_764_400_000.0 + t, "training", seen.training))
    trace = tmp_path / "trace.jsonl"
    trace.write_text("".join(lines))
    assert main(["replay", str(trace)]) == 0
    worst = [line for line in capsys.readouterr().out.splitlines() if line.startswith("  rank ")]
    assert len(worst) == 1 and worst[0].startswith("  rank 5 on node-000 costs ") and "(compute " in worst[0]


def test_replay_names_the_piece_it_cannot_read(capsys, tmp_path):
    present = tmp_path / "a.jsonl"
    present.write_text('{"ts": 1, "host": {"cpu_percent": 5}}\n')
    assert main(["replay", str(present), str(tmp_path / "gone.jsonl")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "gone.jsonl" in err[0]
