"""Fixture readers for the framework adapter tests."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

FRAMEWORKS = Path(__file__).resolve().parent.parent / "fixtures" / "frameworks"


@pytest.fixture
def fixture_text():
    def read(name: str) -> str:
        return (FRAMEWORKS / name).read_text(encoding="utf-8")

    return read


@pytest.fixture
def fixture_json(fixture_text):
    def read(name: str) -> Any:
        return json.loads(fixture_text(name))

    return read
