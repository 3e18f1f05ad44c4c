"""The ``-state-dir`` file: written atomically, versioned, and set aside — never fatal — when it cannot be used."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import pytest

from trainpulse_otel.publish.life_state import FORMAT, SAVE_EVERY_S, STATE_FILE, VERSION, LifeKeeper, LifeStore


class Holder:
    """A pipeline's two life methods, recording what it was given."""

    def __init__(self, state: dict[str, Any] | None = None, refuse: bool = False) -> None:
        self.state = state or {"life": {"n": 1}}
        self.restored: list[Any] = []
        self.refuse = refuse

    def life_state(self) -> dict[str, Any]:
        return self.state

    def restore_life(self, state: Any) -> None:
        if self.refuse:
            raise ValueError("'last_step' is not a step")
        self.restored.append(state)


def write(path: Path, envelope: Any) -> None:
    path.write_text(json.dumps(envelope) if not isinstance(envelope, str) else envelope)


def test_a_saved_state_is_read_back_and_the_write_leaves_nothing_beside_it(tmp_path):
    store = LifeStore(tmp_path / "new" / "dir", "job-1")
    store.save({"life": {"steps": [1, 2]}}, now=5.0)
    assert [p.name for p in store.dir.iterdir()] == [STATE_FILE]
    envelope = json.loads(store.path.read_text())
    assert envelope == {
        "format": FORMAT,
        "version": VERSION,
        "job_id": "job-1",
        "saved_at": 5.0,
        "life": {"life": {"steps": [1, 2]}},
    }
    assert store.load() == {"life": {"steps": [1, 2]}}


def test_a_write_that_fails_midway_leaves_the_previous_state_whole(tmp_path):
    store = LifeStore(tmp_path, "job-1")
    store.save({"n": 1})
    with pytest.raises(ValueError, match="Out of range float"):
        store.save({"n": float("nan")})  # JSON refuses it halfway through the write
    assert store.load() == {"n": 1} and [p.name for p in tmp_path.iterdir()] == [STATE_FILE]


@pytest.mark.parametrize(
    ("content", "reason", "said"),
    [
        ('{"format": "trainpulse.job-life", "version": 1, "life": {', "corrupt", "it is not JSON"),
        ("[1, 2]", "foreign", "it is not a trainpulse.job-life file"),
        ({"format": FORMAT, "version": VERSION + 1, "life": {}}, "foreign", "is not one this TrainPulse reads"),
        (
            {"format": FORMAT, "version": 1, "job_id": "job-2", "life": {}},
            "foreign",
            "it belongs to job 'job-2', not 'job-1'",
        ),
        ({"format": FORMAT, "version": 1, "job_id": "job-1", "life": "all"}, "corrupt", "it holds no life"),
    ],
)
def test_an_unusable_file_is_set_aside_with_its_reason(tmp_path, caplog, content, reason, said):
    store = LifeStore(tmp_path, "job-1")
    write(store.path, content)
    with caplog.at_level(logging.WARNING):
        assert store.load() is None
    (aside,) = tmp_path.iterdir()
    assert aside.name.startswith(f"{STATE_FILE}.{reason}-") and said in caplog.text and aside.name in caplog.text


def test_a_state_of_no_named_job_is_continued_by_a_daemon_that_names_one(tmp_path):
    write(tmp_path / STATE_FILE, {"format": FORMAT, "version": 1, "job_id": None, "life": {"n": 2}})
    assert LifeStore(tmp_path, "job-1").load() == {"n": 2}


def test_the_keeper_restores_once_and_writes_on_its_cadence(tmp_path):
    now = [100.0]
    store = LifeStore(tmp_path, "job-1")
    store.save({"n": 0})
    holder = Holder({"n": 3})
    keeper = LifeKeeper(store, holder, clock=lambda: now[0])
    assert keeper.restore() and holder.restored == [{"n": 0}]
    now[0] += SAVE_EVERY_S / 2
    keeper.after_tick()
    assert store.load() == {"n": 0}  # not yet due
    now[0] += SAVE_EVERY_S / 2
    keeper.after_tick()
    assert store.load() == {"n": 3}


def test_a_state_the_pipeline_refuses_is_set_aside_and_a_failing_write_is_logged_once(tmp_path, caplog):
    store = LifeStore(tmp_path, "job-1")
    store.save({"n": 0})
    keeper = LifeKeeper(store, Holder(refuse=True))
    with caplog.at_level(logging.WARNING):
        assert not keeper.restore()
    assert "'last_step' is not a step" in caplog.text
    assert next(tmp_path.iterdir()).name.startswith(f"{STATE_FILE}.corrupt-")
    (tmp_path / "blocked").write_text("a file where the directory should be")
    stuck = LifeKeeper(LifeStore(tmp_path / "blocked" / "dir"), Holder())
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        stuck.save()
        stuck.save()
    assert caplog.text.count("cannot be written") == 1
