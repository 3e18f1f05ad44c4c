"""``trainpulse thresholds`` and the config's ``detectors`` overrides, as users run them: real processes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from trainpulse_otel.diagnose import BASES, SIGNALS

TRAINPULSE = [sys.executable, "-m", "trainpulse_otel"]
STRAGGLER = Path(__file__).resolve().parents[1] / "fixtures" / "corpus" / "straggler.jsonl"


def trainpulse(*argv: str, config: dict | None = None, tmp_path: Path | None = None) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TRAINPULSE_", "OTEL_"))}
    env["TRAINPULSE_DISABLE_PLUGIN_AUTOLOAD"] = "1"
    if config is not None:
        assert tmp_path is not None
        path = tmp_path / "config.json"
        path.write_text(json.dumps(config))
        argv = (*argv, "-config", str(path))
    return subprocess.run([*TRAINPULSE, *argv], capture_output=True, text=True, env=env, timeout=120)


def test_every_knob_is_listed_with_its_value_unit_basis_and_reason():
    proc = trainpulse("thresholds", "-json")
    assert proc.returncode == 0, proc.stderr
    rows = json.loads(proc.stdout)
    assert len(rows) >= 60 and len({r["name"] for r in rows}) == len(rows)
    for r in rows:
        assert r["name"] == f"{r['signal']}.{r['knob']}" and r["signal"] in SIGNALS
        assert isinstance(r["value"], (int, float)) and r["value"] == r["default"] and not r["overridden"]
        assert r["unit"] and r["basis"] in BASES and len(r["reason"]) > 20 and r["detectors"]
    assert {r["signal"] for r in rows} >= {"rank_straggler", "training_stalled", "oom_risk", "loss_spike"}
    floors = {r["name"]: r["at_least"] for r in rows if r["at_least"]}
    assert floors["rank_straggler.critical_slowdown"] == "rank_straggler.min_slowdown"
    assert floors["low_mfu.warning"] == "low_mfu.critical"  # lower is worse: the warning sits above
    text = trainpulse("thresholds").stdout
    assert "rank_straggler.min_slowdown" in text and f"{len(rows)} thresholds, 0 overridden" in text


def test_an_override_shows_in_the_listing_and_changes_the_diagnosis_of_a_real_run(tmp_path):
    loose = {"detectors": {"rank_straggler": {"min_slowdown": 0.6, "critical_slowdown": 0.9}}}
    rows = json.loads(trainpulse("thresholds", "-json", config=loose, tmp_path=tmp_path).stdout)
    [row] = [r for r in rows if r["name"] == "rank_straggler.min_slowdown"]
    assert row["value"] == 0.6 and row["default"] == 0.1 and row["overridden"]
    # the text says what the value rests on: the configuration, the default's reason quoted as the default's
    text = trainpulse("thresholds", config=loose, tmp_path=tmp_path).stdout
    [line] = [line for line in text.splitlines() if line.startswith("rank_straggler.min_slowdown ")]
    assert line.split()[1:4] == ["0.6*", "share", "config"]
    assert f"set by the config's 'detectors' (the default 0.1: {row['reason']})" in line
    # the recorded real gloo job whose rank 2 does 35 % more work: a straggler by default, not past 60 %
    default = json.loads(trainpulse("replay", str(STRAGGLER), "-json", "-interval", "100ms").stdout)
    loosened = json.loads(
        trainpulse("replay", str(STRAGGLER), "-json", "-interval", "100ms", config=loose, tmp_path=tmp_path).stdout
    )
    assert "rank_straggler" in {e["signal"] for e in default["timeline"]}
    assert "rank_straggler" not in {e["signal"] for e in loosened["timeline"]}
    assert default["diagnosis"]["root_causes"][0]["cause"] == "straggler_rank"
    assert "straggler_rank" not in {c["cause"] for c in loosened["diagnosis"]["root_causes"]}


def test_a_disabled_detector_is_gone_from_thresholds_and_judges_nothing(tmp_path):
    off = {"detectors": {"disabled": ["ranks"], "loss_spike": {"sigmas": 8}}}
    rows = json.loads(trainpulse("thresholds", "-json", config=off, tmp_path=tmp_path).stdout)
    assert not [r for r in rows if r["signal"] == "rank_straggler"]
    assert [r["value"] for r in rows if r["name"] == "loss_spike.sigmas"] == [8]  # the overrides still apply
    replayed = json.loads(
        trainpulse("replay", str(STRAGGLER), "-json", "-interval", "100ms", config=off, tmp_path=tmp_path).stdout
    )
    assert "rank_straggler" not in {e["signal"] for e in replayed["timeline"]}
    bad = trainpulse("thresholds", "-detectors", '{"disabled": ["rank_stragler"]}')
    assert bad.returncode == 2 and "detectors.disabled: no built-in detector or signal 'rank_stragler'" in bad.stderr


@pytest.mark.parametrize(
    ("detectors", "message"),
    [
        ({"rank_straggler": {"min_slowdwn": 0.2}}, "detectors.rank_straggler.min_slowdwn: unknown threshold"),
        ({"rank_stragler": {"min_slowdown": 0.2}}, "detectors.rank_stragler: no detector has thresholds"),
        ({"rank_straggler": {"min_slowdown": -0.1}}, "detectors.rank_straggler.min_slowdown: must be at least"),
        ({"loss_spike": {"min_history": 2.5}}, "detectors.loss_spike.min_history: must be a whole number"),
        ({"loss_spike": {"sigmas": "six"}}, "loss_spike.sigmas: must be a number"),
        ({"loss_spike": 6}, "detectors: loss_spike: must be an object"),
        ({"low_mfu": {"critical": 0.3}}, "detectors.low_mfu.warning: must be at least low_mfu.critical (0.3)"),
    ],
)
def test_an_override_that_fits_no_knob_stops_start_up_naming_it(tmp_path, detectors, message):
    proc = trainpulse(
        "daemon", "-mode", "none", "-addr", "127.0.0.1:0", config={"detectors": detectors}, tmp_path=tmp_path
    )
    assert proc.returncode == 2 and message in proc.stderr and proc.stderr.count("\n") == 1, proc.stderr
    assert trainpulse("thresholds", config={"detectors": detectors}, tmp_path=tmp_path).returncode == 2
