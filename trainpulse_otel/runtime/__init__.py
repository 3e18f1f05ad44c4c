"""The composition root: Settings in, a running pipeline out (see :mod:`.assemble`).

Entry points — the CLI's commands, the in-process monitor — call only what is
exported here.
"""

from .assemble import (
    Plugins,
    build_pipeline,
    create_api,
    discover,
    knob_overrides,
    open_engine,
    open_life_keeper,
    open_otlp_grpc,
    open_replay,
)
from .engine import Engine, Stepper
from .gc_pacing import PacedCollection
from .replay import FilesReplay, LogReplay, log_account, replay_files, replay_logs
from .session import SIM_WARMUP_S, BackgroundTicks, LocalEngine, warm_up

__all__ = [
    "SIM_WARMUP_S",
    "BackgroundTicks",
    "Engine",
    "FilesReplay",
    "LocalEngine",
    "LogReplay",
    "PacedCollection",
    "Plugins",
    "Stepper",
    "build_pipeline",
    "create_api",
    "discover",
    "knob_overrides",
    "log_account",
    "open_engine",
    "open_life_keeper",
    "open_otlp_grpc",
    "open_replay",
    "replay_files",
    "replay_logs",
    "warm_up",
]
