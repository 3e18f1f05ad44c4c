"""Fixture snapshots and a recording console that renders a frame at a fixed size."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any, Callable

import pytest
from rich.console import Console

from trainpulse_otel.dashboard.layout import render_screen
from trainpulse_otel.dashboard.view import History, Link, View

SNAPSHOTS = Path(__file__).parent.parent / "fixtures" / "snapshots"
LOCAL = Link(source="local · sim · rank_straggler", state="local", changed_at=0.0)


def load_snapshot(name: str) -> dict[str, Any]:
    return json.loads((SNAPSHOTS / f"{name}.json").read_text())


def load_history(name: str) -> History:
    """The fixture's two minutes of slim snapshots, then the snapshot itself."""
    history = History()
    path = SNAPSHOTS / f"{name}.history.json"
    for slim in json.loads(path.read_text()) if path.exists() else []:
        history.add(slim)
    history.add(load_snapshot(name))
    return history


def recording_console(width: int, height: int) -> Console:
    return Console(width=width, height=height, record=True, file=io.StringIO(), force_terminal=True,
                   color_system="truecolor", legacy_windows=False, _environ={})


def render(snapshot: dict | None, width: int, height: int | None, history: History | None = None,
           link: Link = LOCAL, wall: float | None = None) -> list[str]:
    """The frame as the lines a ``width`` x ``height`` terminal would show (no styles)."""
    console = recording_console(width, height or 200)
    if history is None:
        history = History()
        if snapshot is not None:
            history.add(snapshot)
    wall = wall if wall is not None else (snapshot or {}).get("timestamp") or 0.0
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
