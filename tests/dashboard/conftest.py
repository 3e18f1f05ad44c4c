"""Fixture snapshots (the daemon's JSON, read back as a dashboard would) and a recording console
that renders a frame at a fixed size."""

from __future__ import annotations

import io
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from trainpulse_otel.dashboard.layout import render_screen
from trainpulse_otel.dashboard.view import History, Link, View
from trainpulse_otel.publish.snapshot import Snapshot, history_from_dict

SNAPSHOTS = Path(__file__).parent.parent / "fixtures" / "snapshots"
LOCAL = Link(source="local · sim · rank_straggler", state="local", changed_at=0.0)


def load_snapshot(name: str) -> dict[str, Any]:
    return json.loads((SNAPSHOTS / f"{name}.json").read_text())


def load_history(name: str) -> History:
    """The fixture's two minutes of frames (a ``/v1/history`` body), then the snapshot itself."""
    history = History()
    path = SNAPSHOTS / f"{name}.history.json"
    if path.exists():
        history.extend(history_from_dict(json.loads(path.read_text())))
    history.add(Snapshot.from_dict(load_snapshot(name)))
    return history


def recording_console(width: int, height: int) -> Console:
    return Console(
        width=width,
        height=height,
        record=True,
        file=io.StringIO(),
        force_terminal=True,
        color_system="truecolor",
        legacy_windows=False,
        _environ={},
    )


def render(
    snapshot: dict | Snapshot | None,
    width: int,
    height: int | None,
    history: History | None = None,
    link: Link = LOCAL,
    wall: float | None = None,
) -> list[str]:
    """The frame as the lines a ``width`` x ``height`` terminal would show (no styles).

    A dict is read as a daemon's JSON (``Snapshot.from_dict``), exactly as a remote ``top`` reads it.
    """
    console = recording_console(width, height or 200)
    if isinstance(snapshot, dict):
        snapshot = Snapshot.from_dict(snapshot)
    if history is None:
        history = History()
        if snapshot is not None:
            history.add(snapshot)
    if wall is None:
        wall = snapshot.timestamp if snapshot and snapshot.timestamp is not None else 0.0
    console.print(render_screen(View(snapshot, history, link, wall), console, width, height))
    return console.export_text(styles=False).splitlines()


@pytest.fixture
def screen() -> Callable[..., list[str]]:
    return render


@pytest.fixture
def history() -> Callable[[str], History]:
    return load_history


@pytest.fixture
def console_at() -> Callable[[int, int], Console]:
    return recording_console


@pytest.fixture
def snapshot() -> Callable[[str], dict[str, Any]]:
    return load_snapshot
