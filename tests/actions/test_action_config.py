"""The ``actions`` setting: its shape is checked when settings load, its names at start-up; both name the entry."""

from __future__ import annotations

import json

import pytest

from trainpulse_otel.cli import main
from trainpulse_otel.config import ConfigError, load_settings


def actions(value) -> tuple:
    return load_settings(environ={"TRAINPULSE_ACTIONS": json.dumps(value)}).actions


def test_a_command_and_a_webhook_with_their_defaults():
    first, second = actions(
        [
            {"on": {"signal": "rank_straggler"}, "run": ["/usr/bin/scontrol", "update"]},
            {
                "on": {"signal": "*", "severity": "critical"},
                "webhook": "https://user:pw@hooks.example/x",
                "cooldown": "1m",
            },
        ]
    )
    assert (first.name, first.signal, first.severity, first.cooldown, first.timeout) == (
        "run:scontrol",
        "rank_straggler",
        "warning",
        600.0,
        30.0,
    )
    assert first.run == ("/usr/bin/scontrol", "update") and first.webhook is None
    assert (second.name, second.severity, second.cooldown) == ("webhook:hooks.example", "critical", 60.0)  # no secret
    assert first.matches("warning") and first.matches("critical")  # warning is a threshold
    assert second.matches("critical") and not second.matches("warning")


@pytest.mark.parametrize(
    ("value", "named"),
    [
        ({"on": {"signal": "x"}}, "actions: must be a list"),
        ([{"on": {"signal": "x"}}], "actions: [0] needs exactly one of 'run'"),
        ([{"on": {"signal": "x"}, "run": ["a"], "webhook": "http://h"}], "[0] needs exactly one of 'run'"),
        ([{"run": ["a"]}], "[0] on: must be an object"),
        ([{"on": {"signal": "x", "severity": "info"}, "run": ["a"]}], "[0] on.severity: must be one of warning"),
        ([{"on": {"signal": "x", "when": 1}, "run": ["a"]}], "[0] on: unknown key 'when'"),
        ([{"on": {"signal": "Bad Name"}, "run": ["a"]}], "[0] on.signal: must be a signal name or *"),
        ([{"on": {"signal": "x"}, "run": ["a"]}, {"on": {"signal": "x"}, "run": []}], "[1] run: must be a non-empty"),
        ([{"on": {"signal": "x"}, "run": "scontrol update"}], "[0] run: must be a non-empty list of strings"),
        ([{"on": {"signal": "x"}, "webhook": "file:///etc/passwd"}], "[0] webhook: must be an http:// or https://"),
        ([{"on": {"signal": "x"}, "run": ["a"], "timeout": "soon"}], "[0] timeout: invalid in duration 'soon'"),
        ([{"on": {"signal": "x"}, "run": ["a"], "cooldown": -1}], "[0] cooldown: must be at least"),
        ([{"on": {"signal": "x"}, "run": ["a"], "retries": 3}], "[0] unknown key 'retries'"),
    ],
)
def test_a_bad_shape_is_an_error_naming_the_entry(value, named):
    with pytest.raises(ConfigError) as error:
        actions(value)
    assert named in str(error.value) and str(error.value).startswith("actions:")


def test_a_signal_or_cause_nothing_declares_stops_the_daemon_naming_the_entry(capsys, tmp_path):
    config = tmp_path / "c.json"
    known = {"on": {"signal": "rank_straggler"}, "run": ["true"]}
    for entry, named in (
        ({"on": {"signal": "gpu_on_fire"}, "run": ["true"]}, "actions[1].on.signal: unknown signal 'gpu_on_fire'"),
        ({"on": {"signal": "*", "cause": "bad_luck"}, "run": ["true"]}, "actions[1].on.cause: unknown root cause"),
    ):
        config.write_text(json.dumps({"actions": [known, entry]}))
        assert main(["daemon", "-mode", "none", "-addr", "127.0.0.1:0", "-config", str(config)]) == 2
        assert named in capsys.readouterr().err
