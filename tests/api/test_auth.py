"""Bearer tokens over real HTTP, and the refusal to expose an unauthenticated API."""

import json
import logging
import os
import subprocess
import sys

import pytest

from tests import parts

TOKEN = "tp-9f2c41d07be64a0aa3"
BODY = json.dumps({"step_time_ms": 1000.0}).encode()
JSON = {"Content-Type": "application/json"}


@pytest.fixture
def guarded(serve_app):
    return serve_app(lambda engine: parts.app(engine, auth_token=TOKEN))


@pytest.mark.parametrize("header", [None, "Bearer wrong-token-0000000", f"Basic {TOKEN}", "Bearer", TOKEN])
def test_ingest_without_the_right_token_is_401(guarded, header):
    headers = dict(JSON, **({"Authorization": header} if header else {}))
    for path in ("/v1/training", "/v1/framework?name=generic"):
        status, reply_headers, body = guarded.request("POST", path, BODY, headers)
        assert status == 401 and json.loads(body)["field"] == "Authorization"
        assert {k.lower(): v for k, v in reply_headers.items()}["www-authenticate"].startswith("Bearer")
    assert guarded.engine.latest.current().training is None


def test_ingest_with_the_token_is_accepted_and_reads_stay_open(guarded):
    status, _, _ = guarded.request("POST", "/v1/training", BODY, dict(JSON, Authorization=f"Bearer {TOKEN}"))
    assert status == 202
    for path in ("/v1/snapshot", "/v1/history"):
        assert guarded.request("GET", path)[0] == 200  # scope "ingest": reads need no token


def test_scope_all_guards_every_endpoint(serve_app):
    served = serve_app(lambda engine: parts.app(engine, auth_token=TOKEN, auth_scope="all"))
    for path in ("/healthz", "/v1/snapshot", "/v1/history", "/metrics", "/v1/metrics"):
        assert served.request("GET", path)[0] == 401
        assert served.request("GET", path, headers={"Authorization": f"Bearer {TOKEN}"})[0] == 200
    status, headers, _ = served.request("OPTIONS", "/v1/training")  # as api.md says: 200 and what it allows
    assert status == 200 and "POST" in {k.lower(): v for k, v in headers.items()}["allow"]


def test_the_token_never_reaches_the_logs(guarded, caplog):
    caplog.set_level(logging.DEBUG)
    guarded.request("POST", "/v1/training", BODY, dict(JSON, Authorization="Bearer " + TOKEN[::-1]))
    guarded.request("POST", "/v1/training", BODY, dict(JSON, Authorization="Bearer " + TOKEN))
    assert TOKEN not in caplog.text and TOKEN[::-1] not in caplog.text


def _daemon(*args, env_extra=None):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TRAINPULSE_", "OTEL_"))}
    env.update(env_extra or {})
    return subprocess.run(
        [sys.executable, "-m", "trainpulse_otel", "daemon", "-mode", "none", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )


def test_a_non_loopback_address_without_token_is_refused():
    proc = _daemon("-addr", "0.0.0.0:0")
    assert proc.returncode == 2
    assert "refusing to listen on 0.0.0.0:0 without auth_token" in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1


def test_a_short_token_is_refused_without_echoing_it():
    proc = _daemon("-addr", "0.0.0.0:0", env_extra={"TRAINPULSE_AUTH_TOKEN": "short token"})
    assert proc.returncode == 2 and "auth_token" in proc.stderr and "short token" not in proc.stderr
