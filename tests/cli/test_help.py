"""Each command's help lists that command's flags, and only those."""

from __future__ import annotations

import pytest

from trainpulse_otel.cli import main

SERVER_ONLY = ("-addr", "-auth-scope", "-allow-insecure-bind", "-max-body-bytes", "-max-ranks")


def help_text(command: str, capsys: pytest.CaptureFixture[str]) -> str:
    with pytest.raises(SystemExit) as done:
        main([command, "-h"])
    assert done.value.code == 0
    return capsys.readouterr().out


def test_the_daemon_lists_its_server_flags(capsys):
    text = help_text("daemon", capsys)
    for flag in (*SERVER_ONLY, "-auth-token", "-mode", "-interval", "-scenario", "-record", "-history-size"):
        assert f"{flag} " in text, flag


@pytest.mark.parametrize("command", ["top", "snapshot"])
def test_top_and_snapshot_list_no_server_flag(command, capsys):
    text = help_text(command, capsys)
    assert not [flag for flag in SERVER_ONLY if f"{flag} " in text]
    for flag in ("-mode", "-interval", "-scenario", "-warmup"):
        assert f"{flag} " in text, flag
    assert ("-remote " in text) == (command == "top") and ("-auth-token " in text) == (command == "top")


def test_the_contract_flags_still_parse_where_they_are_hidden(capsys):
    assert main(["snapshot", "-mode", "sim", "-addr", "127.0.0.1:9999", "-warmup", "5s"]) == 0
    assert '"mode": "sim"' in capsys.readouterr().out


def test_replay_takes_no_window_it_would_not_use(capsys):
    text = help_text("replay", capsys)
    assert "-history-size" not in text and "-interval " in text


def test_top_once_prints_a_frame_without_key_hints(capsys):
    assert main(["top", "-mode", "sim", "-once", "-warmup", "20s"]) == 0
    frame = capsys.readouterr().out
    assert "TrainPulse" in frame or "HEALTH" in frame.upper()
    assert "q quit" not in frame and "p pause" not in frame
