"""``trainpulse top`` in a real terminal: tmux on a private socket, a fixed window size.

The command runs under a small shell script that, once ``top`` has exited,
prints its exit status and the terminal's ``icanon``/``echo`` modes, so the
test can see that ``q``, Ctrl-C and SIGTERM all leave a clean terminal behind.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

TMUX = shutil.which("tmux")
pytestmark = [pytest.mark.slow, pytest.mark.skipif(TMUX is None, reason="tmux is not installed (.ci/run installs it)")]

#: A GPU's bar: at the start of a line, or second on a line in the compact two-per-row layout
#: (which ``top`` picks when signals and root causes need the rows).
GPU_ROW = re.compile(r"(?:^|\s{2,})(\d{1,2}) +(?:H100[^█]*)?[█▉▊▋▌▍▎▏░]", re.MULTILINE)


class Pane:
    """One tmux server of our own running ``trainpulse top`` in a window of a fixed size."""

    def __init__(self, tmp_path: Path, args: list[str], width: int = 120, height: int = 40) -> None:
        self.socket = f"trainpulse-test-{uuid.uuid4().hex[:12]}"
        self.pid_file = tmp_path / "top.pid"
        self.err_file = tmp_path / "top.err"
        top = shlex.join([sys.executable, "-m", "trainpulse_otel", "top", *args])
        script = tmp_path / "run.sh"
        script.write_text(
            "trap : INT\n"  # Ctrl-C reaches the whole foreground group: the script must outlive it
            f"sh -c 'echo $$ > {self.pid_file}; exec {top} 2>{self.err_file}'\n"
            'echo "rc=$?"\n'
            "echo \"modes=$(stty -a | tr ' ;' '\\n\\n' | grep -E '^-?(icanon|echo)$' | tr '\\n' ' ')\"\n"
            "sleep 60\n"
        )
        self.tmux("new-session", "-d", "-x", str(width), "-y", str(height), f"sh {script}")

    def tmux(self, *args: str) -> str:
        done = subprocess.run(
            [TMUX, "-L", self.socket, "-f", "/dev/null", *args], capture_output=True, text=True, timeout=10
        )
        assert done.returncode == 0, done.stderr
        return done.stdout

    def screen(self) -> str:
        return self.tmux("capture-pane", "-p")

    def wait_for(self, ready: Callable[[str], bool], timeout: float = 12.0) -> str:
        deadline = time.monotonic() + timeout
        text = ""
        while time.monotonic() < deadline:
            text = self.screen()
            if ready(text):
                return text
            time.sleep(0.2)
        raise AssertionError(f"timed out; the screen shows:\n{text}\nstderr:\n{self.stderr()}")

    def stderr(self) -> str:
        return self.err_file.read_text() if self.err_file.exists() else ""

    def pid(self) -> int:
        return int(self.pid_file.read_text())

    def display(self, fmt: str) -> str:
        return self.tmux("display-message", "-p", fmt).strip()

    def close(self) -> None:
        subprocess.run([TMUX, "-L", self.socket, "kill-server"], capture_output=True, timeout=10)


@pytest.fixture
def pane(tmp_path: Path) -> Iterator[Callable[..., Pane]]:
    panes: list[Pane] = []

    def start(args: list[str], **size: int) -> Pane:
        panes.append(Pane(tmp_path, args, **size))
        return panes[-1]

    yield start
    for p in panes:
        p.close()


def exited_cleanly(p: Pane) -> None:
    """``top`` ended with status 0, no traceback, line mode and echo back on, main screen, cursor shown."""
    text = p.wait_for(lambda s: "rc=" in s and "modes=" in s, timeout=10)
    assert "rc=0" in text, text
    assert re.search(r"modes=(?=.*(?<!-)\bicanon\b)(?=.*(?<!-)\becho\b)", text), text
    assert "Traceback" not in p.stderr() and "Traceback" not in text
    assert p.display("#{alternate_on}") == "0"
    assert p.display("#{cursor_flag}") == "1"


def test_top_shows_the_simulated_node_follows_a_resize_and_q_quits(pane):
    p = pane(["-mode", "sim", "-scenario", "rank_straggler", "-interval", "1s"], width=120, height=40)
    text = p.wait_for(lambda s: len(GPU_ROW.findall(s)) == 8)
    assert [int(i) for i in GPU_ROW.findall(text)] == list(range(8))
    assert "GPUs 8 × H100 80GB HBM3" in text
    assert "local · sim · rank_straggler" in text
    # the scenario's signal is on screen, and the straggler is called out by rank and GPU
    assert re.search(r"(CRIT|WARN) rank_straggler", text), text
    assert re.search(r"rank 5 · GPU 5 · node-000  3\d% slower than the median rank|slowest r5 1\.3", text), text
    assert ("tokens/s" in text or "tok/s" in text) and "MFU" in text

    p.tmux("resize-window", "-x", "80", "-y", "24")
    small = p.wait_for(
        lambda s: (
            len(s.splitlines()) <= 24
            and "GPUs" in s
            and max(len(line) for line in s.splitlines()) <= 80
            and "q quit" not in s
        )
    )
    assert len(GPU_ROW.findall(small)) == 8

    p.tmux("send-keys", "q")
    exited_cleanly(p)


@pytest.mark.parametrize("how", ["ctrl-c", "sigterm"])
def test_ctrl_c_and_sigterm_also_leave_the_terminal_clean(pane, how):
    p = pane(["-mode", "sim", "-warmup", "5s"], width=100, height=30)
    p.wait_for(lambda s: "GPUs 8" in s)
    if how == "ctrl-c":
        p.tmux("send-keys", "C-c")
    else:
        os.kill(p.pid(), signal.SIGTERM)
    exited_cleanly(p)
