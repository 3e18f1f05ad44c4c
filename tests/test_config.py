"""Settings precedence (flags > env > file > defaults), Go durations, and errors that name the key."""

import json

import pytest

from trainpulse_otel.config import ConfigError, load_settings
from trainpulse_otel.config.durations import parse_duration


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("500ms", 0.5),
        ("1s", 1.0),
        ("2m", 120.0),
        ("1h30m", 5400.0),
        ("1.5s", 1.5),
        ("250us", 0.00025),
        ("0", 0.0),
        ("1m0.5s", 60.5),
    ],
)
def test_go_durations(text, seconds):
    assert parse_duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize("text", ["1", "fast", "", "1x", "s", "1.2.3s"])
def test_bad_durations(text):
    with pytest.raises(ValueError, match="duration"):
        parse_duration(text)


def test_defaults():
    s = load_settings(environ={})
    assert (s.addr, s.interval, s.mode, s.metrics_namespace) == ("127.0.0.1:9876", 1.0, "auto", "trainpulse")
    assert s.max_body_bytes == 1 << 20 and s.prometheus == {"enabled": True}


def test_precedence_flags_over_env_over_file(tmp_path):
    cfg = tmp_path / "c.json"
    cfg.write_text(json.dumps({"interval": "5s", "mode": "none", "history_size": 50, "log_level": "debug"}))
    env = {"TRAINPULSE_INTERVAL": "2s", "TRAINPULSE_MODE": "sim"}
    s = load_settings(flags={"mode": "none", "interval": None}, environ=env, config_path=str(cfg))
    assert s.mode == "none"  # flag beats env
    assert s.interval == 2.0  # env beats file
    assert s.history_size == 50  # file beats default
    assert s.log_level == "debug"


def test_config_path_from_env(tmp_path):
    cfg = tmp_path / "c.json"
    cfg.write_text(json.dumps({"addr": "127.0.0.1:1234"}))
    assert load_settings(environ={"TRAINPULSE_CONFIG": str(cfg)}).port == 1234


def test_file_numbers_are_seconds(tmp_path):
    cfg = tmp_path / "c.json"
    cfg.write_text(json.dumps({"interval": 0.25}))
    assert load_settings(environ={}, config_path=str(cfg)).interval == 0.25


@pytest.mark.parametrize(
    ("source", "key"),
    [
        ({"file": {"intervall": "1s"}}, "intervall"),
        ({"file": {"interval": "soon"}}, "interval"),
        ({"env": {"TRAINPULSE_MODE": "gpu"}}, "mode"),
        ({"env": {"TRAINPULSE_BOGUS": "1"}}, "TRAINPULSE_BOGUS"),
        ({"flags": {"history_size": "many"}}, "history_size"),
        ({"flags": {"addr": "9876"}}, "addr"),
        ({"file": {"otlp": {"endpoint": "http://x:4317", "protocl": "grpc"}}}, "otlp"),
        ({"file": {"scenario": "Volcano!"}}, "scenario"),
    ],
)
def test_errors_name_the_key(tmp_path, source, key):
    cfg = tmp_path / "c.json"
    cfg.write_text(json.dumps(source.get("file", {})))
    with pytest.raises(ConfigError) as info:
        load_settings(flags=source.get("flags"), environ=source.get("env", {}), config_path=str(cfg))
    assert info.value.key == key
    assert str(info.value).startswith(key + ":")


def test_a_scenario_is_parsed_for_its_syntax_only():
    # Whether the simulator knows the name is checked at start-up (collect.sim.combine.check_scenario):
    # config.py imports nothing else of the package.
    assert load_settings(flags={"scenario": "volcano,rank_straggler"}, environ={}).scenario == "volcano,rank_straggler"


def test_unreadable_and_invalid_files(tmp_path):
    with pytest.raises(ConfigError, match="cannot read"):
        load_settings(environ={}, config_path=str(tmp_path / "missing.json"))
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(ConfigError, match="not valid JSON"):
        load_settings(environ={}, config_path=str(bad))


def test_example_config_is_valid_and_complete():
    from pathlib import Path

    from trainpulse_otel.config import OPTIONS

    example = json.loads((Path(__file__).parent.parent / "config.example.json").read_text())
    load_settings(environ={}, config_path=str(Path(__file__).parent.parent / "config.example.json"))
    assert set(example) == {o.key for o in OPTIONS}
