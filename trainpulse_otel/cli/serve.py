"""The collecting commands: ``daemon`` (collect, diagnose, serve the API, export), ``snapshot`` (one snapshot after
the warm-up) and ``top`` (the live terminal view, local or following a daemon)."""

from __future__ import annotations

import argparse
import json
import logging
import threading
from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING

from ..config import Settings
from ..version import __version__
from .flags import UsageError, configure, on_signals, settings_of

if TYPE_CHECKING:
    from ..publish.life_state import LifeKeeper

log = logging.getLogger("trainpulse_otel.cli")


def cmd_daemon(args: argparse.Namespace) -> int:
    """``trainpulse daemon``: until SIGTERM or SIGINT, then the exporters flushed."""
    from ..api import ApiServer
    from ..runtime import PacedCollection, create_api, discover, open_engine, open_life_keeper, open_otlp_grpc, warm_up

    settings = settings_of(args)
    configure(settings)
    _check_exposure(settings)
    plugins = discover(disabled=settings.disabled_detectors)
    engine = open_engine(settings, push=True, plugins=plugins, actions=True)
    try:
        server = ApiServer(create_api(engine, settings, plugins), settings.host, settings.port, settings.server)
    except OSError as exc:
        engine.close()
        raise UsageError(f"cannot listen on {settings.addr}: {exc.strerror or exc}") from None
    try:
        grpc_server = open_otlp_grpc(engine, settings)
    except RuntimeError as exc:
        engine.close()
        raise UsageError(f"cannot listen for OTLP/gRPC on {settings.otlp_grpc_addr}: {exc}") from None
    keeper = open_life_keeper(engine, settings)  # the job's life so far, when a -state-dir keeps it
    stop = threading.Event()
    on_signals(lambda: stop.set())
    if engine.mode == "sim":
        warm_up(engine)  # in virtual time, as snapshot and top do: a baseline, and the fault from the first answer
    server.start()
    if grpc_server is not None:
        grpc_server.start()
    log.info("trainpulse daemon %s: mode %s, interval %gs", __version__, engine.mode, settings.interval)
    try:
        with PacedCollection() as collection:  # full collections between ticks, after start-up is frozen
            engine.run(stop, after_tick=_after_tick(collection.after_tick, keeper))
    finally:
        log.info("shutting down: flushing exporters")
        if keeper is not None:
            keeper.save()
        if grpc_server is not None:
            grpc_server.close()
        server.close()
        engine.close()
    return 0


def _after_tick(collect: Callable[[], None], keeper: LifeKeeper | None) -> Callable[[], None]:
    """What runs in the gap after each tick: the paced garbage collection, and the life's state written when due."""
    if keeper is None:
        return collect

    def after() -> None:
        keeper.after_tick()
        collect()

    return after


def _check_exposure(settings: Settings) -> None:
    """Refuse an API (or an OTLP/gRPC receiver) reachable from the network that anyone could write to."""
    if settings.auth_token or settings.allow_insecure_bind:
        return
    for addr in (settings.addr, settings.otlp_grpc_addr):  # is_loopback reads ``addr``: ask it of each address
        if addr is not None and not replace(settings, addr=addr).is_loopback:
            raise UsageError(
                f"refusing to listen on {addr} without auth_token: anyone who can reach it could write "
                "training data; set TRAINPULSE_AUTH_TOKEN, or pass -allow-insecure-bind if the network is trusted"
            )


def cmd_snapshot(args: argparse.Namespace) -> int:
    """``trainpulse snapshot``: the contract's snapshot JSON after the warm-up."""
    from ..runtime import open_engine, warm_up

    settings = settings_of(args)
    configure(settings)
    engine = open_engine(settings)
    try:
        warm_up(engine)
        print(json.dumps(engine.snapshot().to_dict(), indent=2))
    finally:
        engine.close()
    return 0


def cmd_top(args: argparse.Namespace) -> int:
    """``trainpulse top``: the terminal view of a local engine, or of a daemon (``-remote``)."""
    from ..dashboard.app import run_top
    from ..dashboard.sources import LocalSource, RemoteSource, Source

    settings = settings_of(args)
    configure(settings, quiet=True)
    source: Source
    if args.remote:
        source = RemoteSource(args.remote, settings.auth_token, timeout_s=max(1.0, settings.interval))
    else:
        from ..runtime import LocalEngine, open_engine

        source = LocalSource(LocalEngine(open_engine(settings)))
    return run_top(source, settings.interval, once=args.once)
