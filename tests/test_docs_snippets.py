"""The docs' runnable snippets, run as a user would run them, against a real daemon.

A fenced block in README.md or docs/*.md preceded by ``<!-- snippet: run -->`` is run: a ``sh``/``bash`` block
as a script (``set -e``) in the repository's root, with the daemon's address ``localhost:9876`` or
``127.0.0.1:9876`` pointed at this module's own daemon and a ``trainpulse top`` given ``-once``; a ``python``
block as a script. Each must exit 0. A JSON block preceded by ``<!-- snippet: answer -->`` is the answer the run
block before it shows: the block's output must be JSON of the same shape (every key shown, with a value of the
same type; ``"..."`` stands for more keys).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
MARKER = re.compile(r"^<!-- snippet: (run|answer) -->\s*$")
FENCE = re.compile(r"^```(\w*)\s*$")
ADDRESS = re.compile(r"(?:localhost|127\.0\.0\.1):9876")
BASH = shutil.which("bash") or "/bin/bash"


@dataclass
class Snippet:
    """One marked block: where it is, its language, its text, and the answer shown after it (if any)."""

    where: str
    language: str
    text: str
    answer: str | None = None


def snippets(path: Path) -> Iterator[Snippet]:
    """The marked blocks of one Markdown file, each run block with the answer block that follows it."""
    lines = path.read_text(encoding="utf-8").splitlines()
    last: Snippet | None = None
    for i, line in enumerate(lines):
        marker = MARKER.match(line)
        fence = FENCE.match(lines[i + 1]) if marker and i + 1 < len(lines) else None
        if marker is None:
            continue
        assert fence is not None, f"{path.name}:{i + 1}: a snippet marker must stand right above a fenced block"
        end = next(j for j in range(i + 2, len(lines)) if lines[j].startswith("```"))
        text = "\n".join(lines[i + 2 : end])
        if marker[1] == "run":
            if last is not None:
                yield last
            last = Snippet(f"{path.relative_to(ROOT)}:{i + 2}", fence[1], text)
        else:
            assert last is not None and last.answer is None, f"{path.name}:{i + 1}: an answer follows a run block"
            last.answer = text
    if last is not None:
        yield last


ALL = [s for path in DOCS for s in snippets(path)]


def same_shape(shown: object, got: object, where: str = "$") -> list[str]:
    """Where ``got`` does not have the shape the docs show: a missing key, or a value of another type."""
    if isinstance(shown, dict):
        if not isinstance(got, dict):
            return [f"{where}: an object in the docs, {type(got).__name__} here"]
        return [
            problem
            for key, value in shown.items()
            if key != "..."
            for problem in (
                [f"{where}.{key}: missing"] if key not in got else same_shape(value, got[key], f"{where}.{key}")
            )
        ]
    if isinstance(shown, list):
        if not isinstance(got, list):
            return [f"{where}: a list in the docs, {type(got).__name__} here"]
        return same_shape(shown[0], got[0], f"{where}[0]") if shown and got else []
    numbers = (int, float)
    if isinstance(shown, numbers) and not isinstance(shown, bool):
        return [] if isinstance(got, numbers) and not isinstance(got, bool) else [f"{where}: a number in the docs"]
    return [] if shown is None or got is None or type(shown) is type(got) else [f"{where}: {type(shown).__name__}"]


@pytest.fixture(scope="module")
def daemon() -> Iterator[str]:
    """A real daemon in simulation on a free loopback port, as `scripts/run` starts one; its address."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TRAINPULSE_", "OTEL_"))}
    cmd = [sys.executable, "-m", "trainpulse_otel", "daemon", "-mode", "sim", "-addr", f"127.0.0.1:{port}"]
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    address = f"127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                with urllib.request.urlopen(f"http://{address}/healthz", timeout=2):
                    break
            except OSError:
                time.sleep(0.2)
        yield address
    finally:
        proc.terminate()
        proc.wait(timeout=20)


def run_shell(snippet: Snippet, address: str) -> str:
    """A shell block as one script (``set -e``: it stops at the first failing command), in the repository's root;
    its output."""
    script = ADDRESS.sub(address, snippet.text)
    script = re.sub(r"^(\S*trainpulse top\b)(?!.*-once)(.*)$", r"\1\2 -once", script, flags=re.MULTILINE)
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    done = subprocess.run([BASH, "-e", "-o", "pipefail", "-c", script], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=180)  # fmt: skip
    assert done.returncode == 0, f"{snippet.where}: exited {done.returncode}: {done.stderr[-2000:]}"
    return done.stdout


@pytest.mark.e2e
@pytest.mark.parametrize("snippet", ALL, ids=[s.where for s in ALL])
def test_a_marked_snippet_runs_as_written_and_answers_as_shown(snippet: Snippet, daemon: str, tmp_path: Path):
    if snippet.language == "python":
        env = {**os.environ, "TRAINPULSE_ENDPOINT": f"http://{daemon}"}
        done = subprocess.run([sys.executable, "-"], input=ADDRESS.sub(daemon, snippet.text), cwd=tmp_path, env=env,
                              capture_output=True, text=True, timeout=300)  # fmt: skip
        assert done.returncode == 0, f"{snippet.where}: {done.stderr[-3000:]}"
        output = done.stdout
    else:
        assert snippet.language in ("sh", "bash", "console", ""), f"{snippet.where}: cannot run {snippet.language}"
        output = run_shell(snippet, daemon)
    if snippet.answer is not None:
        problems = same_shape(json.loads(snippet.answer), json.loads(output))
        assert not problems, f"{snippet.where}: the answer's shape differs from the docs': {problems}"


def test_the_docs_mark_the_snippets_users_copy_first():
    marked = {s.where.split(":")[0] for s in ALL}
    assert {"README.md", "docs/api.md", "docs/instrumentation.md"} <= marked, marked


def test_shape_checks_name_a_missing_key_and_a_wrong_type():
    shown = {"status": "accepted", "sample": {"mfu": 0.4, "ranks": []}, "...": "..."}
    assert same_shape(shown, {"status": "accepted", "sample": {"mfu": 1, "ranks": [1]}, "x": 1}) == []
    assert same_shape(shown, {"status": 3, "sample": {"ranks": []}}) == ["$.status: str", "$.sample.mfu: missing"]
