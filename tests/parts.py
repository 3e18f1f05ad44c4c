"""The composition root's parts for tests: the built-in plugins (found once), and engines, apps and
pipelines assembled from them exactly as the entry points assemble theirs."""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from flask import Flask

from trainpulse_otel.config import Settings
from trainpulse_otel.diagnose import DiagnosticPipeline
from trainpulse_otel.runtime import Engine, Plugins, Stepper, build_pipeline, discover, open_engine, open_replay


@lru_cache(maxsize=1)
def builtins() -> Plugins:
    """TrainPulse's own plugins, without third-party ones."""
    return discover(autoload=False)


def engine(settings: Settings | None = None, **kwargs: Any) -> Engine:
    """``open_engine`` with the built-in plugins (``collectors=[...]``, ``mode=...``, ``push=...`` pass through)."""
    return open_engine(settings or Settings(mode="none", addr="127.0.0.1:0"), plugins=builtins(), **kwargs)


def app(backend: Any, **kwargs: Any) -> Flask:
    """The API over ``backend`` with the built-in adapters."""
    from trainpulse_otel.api import create_app

    return create_app(backend, builtins().adapters, **kwargs)


def pipeline() -> DiagnosticPipeline:
    """A fresh pipeline with every built-in detector and rule."""
    return build_pipeline(builtins())


def stepper(**settings: Any) -> Stepper:
    """Replay's step over fresh latest samples, window and pipeline."""
    return open_replay(Settings(**settings), builtins())
