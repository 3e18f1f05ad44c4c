"""Fixtures of the command tests: real daemons started as a user starts them, stopped after each test."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from tests.cli.daemons import SimDaemon


@pytest.fixture
def start() -> Iterator[Callable[..., SimDaemon]]:
    """Start sim daemons with extra flags; each is stopped at the end of the test."""
    daemons: list[SimDaemon] = []

    def run(*flags: str, **options: Any) -> SimDaemon:
        daemons.append(SimDaemon(*flags, **options))
        return daemons[-1]

    yield run
    for daemon in daemons:
        daemon.stop()
