"""Keys from a real pseudo-terminal, the terminal modes put back, and what each key does."""

from __future__ import annotations

import io
import os
import pty
import termios
import threading

from rich.console import Console

from trainpulse_otel.dashboard.app import Dashboard
from trainpulse_otel.dashboard.keys import KeyReader
from trainpulse_otel.dashboard.sources import RemoteSource
from trainpulse_otel.dashboard.view import History


def test_keys_arrive_one_by_one_and_the_terminal_is_restored():
    master, slave = pty.openpty()
    got: list[str] = []
    arrived = threading.Event()

    def on_key(key: str) -> None:
        got.append(key)
        if len(got) == 3:
            arrived.set()

    try:
        with os.fdopen(os.dup(slave), "r") as stream:
            before = termios.tcgetattr(slave)
            with KeyReader(on_key, stream):
                during = termios.tcgetattr(slave)
                os.write(master, "pqé".encode())
                assert arrived.wait(5)
            after = termios.tcgetattr(slave)
    finally:
        os.close(master)
        os.close(slave)
    assert got == ["p", "q", "é"]  # no line buffering: each key on its own, UTF-8 decoded
    assert not during[3] & (termios.ICANON | termios.ECHO)  # cbreak, no echo …
    assert during[3] & termios.ISIG  # … but Ctrl-C still raises SIGINT
    assert after == before


def test_the_terminal_is_restored_when_the_block_raises():
    master, slave = pty.openpty()
    try:
        with os.fdopen(os.dup(slave), "r") as stream:
            before = termios.tcgetattr(slave)
            try:
                with KeyReader(lambda key: None, stream):
                    raise RuntimeError("boom")
            except RuntimeError:
                pass
            assert termios.tcgetattr(slave) == before
    finally:
        os.close(master)
        os.close(slave)


def test_off_a_terminal_the_reader_does_nothing():
    with KeyReader(lambda key: None, io.StringIO("q")) as reader:
        assert not reader._thread.is_alive()


def _dashboard() -> Dashboard:
    return Dashboard(RemoteSource("http://127.0.0.1:9"), History(), Console(file=io.StringIO()), interval_s=1.0)


def test_q_and_ctrl_c_quit_and_p_pauses():
    dashboard = _dashboard()
    dashboard.on_key("p")
    assert dashboard.paused and not dashboard.stop.is_set()
    dashboard.on_key("p")
    assert not dashboard.paused
    dashboard.on_key("x")
    assert not dashboard.stop.is_set()
    dashboard.on_key("\x03")
    assert dashboard.stop.is_set()
    again = _dashboard()
    again.on_key("q")
    assert again.stop.is_set()
