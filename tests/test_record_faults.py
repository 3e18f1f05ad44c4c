"""-record on a full or unwritable disk: the error is logged once and the daemon goes on."""

import logging

import pytest

from tests import parts
from trainpulse_otel.collect.sim import SimCollector
from trainpulse_otel.config import Settings


@pytest.mark.parametrize("path", ["/dev/full", "/nonexistent-dir/trace.jsonl"])
def test_recording_failures_are_logged_once_and_ticks_go_on(path, caplog):
    caplog.set_level(logging.INFO, logger="trainpulse_otel")
    engine = parts.engine(Settings(record=path), collectors=[SimCollector()], mode="sim", clock=lambda: 1_764_400_000.0)
    try:
        for i in range(5):
            result = engine.tick(1_764_400_000.0 + i)
        assert engine.ticks == 5 and result.diagnosis is not None
        assert len(engine.window) == 5 and len(engine.frame.gpus) == 8
    finally:
        engine.close()
    failures = [r for r in caplog.records if "recording to" in r.getMessage() and r.levelno == logging.ERROR]
    assert len(failures) == 1 and path in failures[0].getMessage()


def test_recording_resumes_when_writes_succeed_again(tmp_path, caplog):
    caplog.set_level(logging.INFO, logger="trainpulse_otel")
    target = tmp_path / "later" / "trace.jsonl"
    engine = parts.engine(
        Settings(record=str(target)), collectors=[SimCollector()], mode="sim", clock=lambda: 1_764_400_000.0
    )
    try:
        engine.tick(1_764_400_000.0)  # the folder does not exist yet: fails
        target.parent.mkdir()
        engine.tick(1_764_400_001.0)
    finally:
        engine.close()
    assert any("resumed" in r.getMessage() for r in caplog.records)
    assert target.read_text().count('"gpus"') == 1
