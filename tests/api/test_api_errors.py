"""Every bad-input class over real HTTP (waitress): a JSON 4xx naming the field, never a 500."""

import json
import logging
import socket

import pytest

from tests import parts

JSON = {"Content-Type": "application/json"}

BAD_TRAINING_BODIES = [
    # (what, raw body, expected field or None)
    ("malformed JSON", b'{"step_time_ms": 12', None),
    ("trailing garbage", b'{"step_time_ms": 12} x', None),
    ("empty body", b"", None),
    ("invalid UTF-8", b'{"model_name": "\xff\xfe", "step_time_ms": 1}', None),
    # NaN/Infinity are read (Python's json writes them); only loss and grad_norm may hold them
    ("NaN literal", b'{"step_time_ms": NaN}', "step_time_ms"),
    ("Infinity literal", b'{"tokens_per_sec": Infinity}', "tokens_per_sec"),
    ("-Infinity in a rank", b'{"ranks": [{"rank": 0, "sync_wait_ms": -Infinity}]}', "ranks[0].sync_wait_ms"),
    ("NaN step", b'{"global_step": NaN, "loss": 2.0}', "global_step"),
    ("NaN beside a NaN loss", b'{"loss": NaN, "mfu": NaN}', "mfu"),
    ("deep nesting", b"[" * 200_000 + b"]" * 200_000, None),
    ("array body", b"[1, 2, 3]", None),
    ("string body", b'"step_time_ms"', None),
    ("number body", b"42", None),
    ("null body", b"null", None),
    ("huge number overflows to inf", b'{"step_time_ms": 1e400}', "step_time_ms"),
    ("huge integer", b'{"global_step": 100000000000000000000000000000, "step_time_ms": 1}', "global_step"),
    ("string for a number", b'{"step_time_ms": "950"}', "step_time_ms"),
    ("boolean for a number", b'{"tokens_per_sec": true}', "tokens_per_sec"),
    ("object for a number", b'{"mfu": {"value": 0.4}}', "mfu"),
    ("number for a string", b'{"model_name": 7, "step_time_ms": 1}', "model_name"),
    ("over-long string", json.dumps({"model_name": "m" * 300, "step_time_ms": 1}).encode(), "model_name"),
    ("negative time", b'{"step_time_ms": -5}', "step_time_ms"),
    ("negative rate", b'{"samples_per_sec": -1}', "samples_per_sec"),
    ("mfu above 1", b'{"mfu": 1.2}', "mfu"),
    ("bubble ratio below 0", b'{"pipeline_bubble_ratio": -0.1}', "pipeline_bubble_ratio"),
    ("fractional step", b'{"global_step": 1.5, "step_time_ms": 1}', "global_step"),
    ("zero world size", b'{"world_size": 0, "step_time_ms": 1}', "world_size"),
    ("avg over max sequence", b'{"avg_seq_len": 900, "max_seq_len": 512}', "avg_seq_len"),
    ("nothing measured", b'{"model_name": "m", "global_step": 3}', None),
    ("ranks not a list", b'{"ranks": {"rank": 0}}', "ranks"),
    ("rank entry not an object", b'{"ranks": [3]}', "ranks[0]"),
    ("rank missing its number", b'{"ranks": [{"step_time_ms": 1}]}', "ranks[0].rank"),
    ("duplicate rank", b'{"ranks": [{"rank": 1}, {"rank": 1}]}', "ranks[1].rank"),
    ("negative rank", b'{"ranks": [{"rank": -1}]}', "ranks[0].rank"),
    ("bad value inside a rank", b'{"ranks": [{"rank": 0}, {"rank": 1, "data_wait_ms": "x"}]}', "ranks[1].data_wait_ms"),
    ("unknown heartbeat phase", b'{"ranks": [{"rank": 0, "phase": "napping"}]}', "ranks[0].phase"),
    ("heartbeat phase not a string", b'{"ranks": [{"rank": 0, "phase": 3}]}', "ranks[0].phase"),
    ("negative phase_since", b'{"ranks": [{"rank": 0, "phase": "data", "phase_since": -1}]}', "ranks[0].phase_since"),
    ("fractional rank step", b'{"ranks": [{"rank": 0, "global_step": 2.5}]}', "ranks[0].global_step"),
    ("negative pid", b'{"ranks": [{"rank": 0, "phase": "data", "pid": -4}]}', "ranks[0].pid"),
    ("stack not an array", b'{"ranks": [{"rank": 0, "phase": "data", "stack": "train.py:3"}]}', "ranks[0].stack"),
    ("stack frame not an object", b'{"ranks": [{"rank": 0, "phase": "data", "stack": [3]}]}', "ranks[0].stack[0]"),
    (
        "stack frame without a line",
        b'{"ranks": [{"rank": 0, "phase": "data", "stack": [{"file": "t.py", "function": "f"}]}]}',
        "ranks[0].stack[0].line",
    ),
    (
        "stack frame line negative",
        b'{"ranks": [{"rank": 0, "phase": "data", "stack": [{"file": "t.py", "line": -1, "function": "f"}]}]}',
        "ranks[0].stack[0].line",
    ),
    (
        "stack too deep",
        json.dumps({"ranks": [{"rank": 0, "stack": [{"file": "t.py", "line": 1, "function": "f"}] * 65}]}).encode(),
        "ranks[0].stack",
    ),
]


@pytest.mark.parametrize(("what", "body", "field"), BAD_TRAINING_BODIES, ids=[c[0] for c in BAD_TRAINING_BODIES])
def test_bad_training_input_is_a_json_400_naming_the_field(served, what, body, field):
    status, headers, raw = served.send("POST", "/v1/training", body, JSON)
    answer = json.loads(raw)
    assert status == 400, (what, answer)
    assert headers["Content-Type"] == "application/json"
    assert answer["field"] == field and answer["error"]
    assert served.engine.latest.current().training is None  # nothing bad got in


def test_too_many_ranks_is_a_400_and_the_server_stays_up(serve_app):
    served = serve_app(lambda engine: parts.app(engine, max_ranks=4))
    body = json.dumps({"ranks": [{"rank": r} for r in range(5)]}).encode()
    status, _, raw = served.send("POST", "/v1/training", body, JSON)
    assert status == 400 and json.loads(raw)["field"] == "ranks"
    assert served.get_json("/healthz")[0] == 200


def test_missing_content_type_is_read_as_json(served):
    status, _, raw = served.send("POST", "/v1/training", b'{"step_time_ms": 700}')
    assert status == 202 and json.loads(raw) == {"status": "accepted"}
    assert served.engine.latest.current().training.step_time_ms == 700


@pytest.mark.parametrize("content_type", ["application/json; charset=utf-8", "application/vnd.trainpulse+json"])
def test_json_with_parameters_or_a_json_suffix_is_accepted(served, content_type):
    status, _, _ = served.send("POST", "/v1/training", b'{"step_time_ms": 1}', {"Content-Type": content_type})
    assert status == 202


@pytest.mark.parametrize(
    "content_type",
    ["application/x-www-form-urlencoded", "text/plain", "application/xml", "multipart/form-data; boundary=x"],
)
def test_other_content_types_are_415_with_a_curl_hint(served, content_type):
    status, _, raw = served.send("POST", "/v1/training", b'{"step_time_ms": 1}', {"Content-Type": content_type})
    answer = json.loads(raw)
    assert status == 415 and answer["field"] == "Content-Type"
    assert "application/json" in answer["error"] and "curl" in answer["error"]


def test_oversized_body_with_content_length_is_413(served):
    body = b'{"step_time_ms": 1, "pad": "' + b"x" * (1 << 20) + b'"}'
    status, headers, raw = served.send("POST", "/v1/training", body, JSON)
    assert status == 413 and headers["Content-Type"] == "application/json"
    assert "larger than 1048576 bytes" in json.loads(raw)["error"]


def test_oversized_chunked_body_without_content_length_is_413(served):
    chunks = iter([b'{"step_time_ms": 1, "pad": "'] + [b"x" * 65536] * 20 + [b'"}'])
    status, _headers, raw = served.send("POST", "/v1/training", chunks, JSON)
    assert status == 413 and "larger than" in json.loads(raw)["error"]


def test_small_chunked_body_is_accepted(served):
    status, _, _ = served.send("POST", "/v1/training", iter([b'{"step_time_', b'ms": 512}']), JSON)
    assert status == 202 and served.engine.latest.current().training.step_time_ms == 512


def test_body_far_beyond_the_limit_is_refused_by_the_server_itself_as_json(serve_app):
    served = serve_app(lambda engine: parts.app(engine, max_body_bytes=1024))
    status, headers, raw = served.send("POST", "/v1/training", b"x" * 65536, JSON)  # past waitress's 8 KiB cap
    assert status == 413 and headers["Content-Type"] == "application/json"
    assert json.loads(raw) == {"error": "request body is larger than 8192 bytes", "field": None}


MALFORMED_HTTP = [
    (b"Transfer-Encoding: chunked\r\n\r\nZZZ\r\n\r\n", "400", "Bad Request"),
    (b"Content-Length: abc\r\n\r\n", "400", "Bad Request: Content-Length is invalid"),
    (b"Transfer-Encoding: gzip\r\n\r\n", "501", "Not Implemented"),
]


@pytest.mark.parametrize(
    ("headers", "code", "message"), MALFORMED_HTTP, ids=["bad chunk", "bad length", "unknown encoding"]
)
def test_malformed_http_gets_a_json_error_from_the_server(served, headers, code, message):
    with socket.create_connection(("127.0.0.1", served.server.port), timeout=10) as sock:
        sock.sendall(b"POST /v1/training HTTP/1.1\r\nHost: x\r\n" + headers)
        reply = b"".join(iter(lambda: sock.recv(65536), b"")).decode()  # the server closes after an error
    head, _, body = reply.partition("\r\n\r\n")
    assert head.startswith(f"HTTP/1.1 {code}") and "Content-Type: application/json" in head
    answer = json.loads(body)
    assert answer["error"].startswith(message) and answer["field"] is None


def test_unknown_path_is_json_404(served):
    for method in ("GET", "POST", "DELETE"):
        status, headers, raw = served.send(method, "/v1/nope")
        assert status == 404 and headers["Content-Type"] == "application/json" and json.loads(raw)["error"]


def test_wrong_method_is_json_405_with_allow(served):
    status, headers, raw = served.send("GET", "/v1/training")
    assert status == 405 and "POST" in headers["Allow"] and json.loads(raw)["field"] is None
    status, headers, _ = served.send("PUT", "/healthz", b"{}", JSON)
    assert status == 405 and "GET" in headers["Allow"]


def test_head_and_options_behave_sensibly(served):
    status, headers, body = served.send("HEAD", "/healthz")
    assert status == 200 and body == b"" and headers["Content-Type"] == "application/json"
    status, headers, _ = served.send("OPTIONS", "/v1/training")
    assert status == 200 and set(headers["Allow"].replace(" ", "").split(",")) >= {"POST", "OPTIONS"}
    status, _, body = served.send("HEAD", "/v1/training")
    assert status == 405 and body == b""


def test_an_internal_failure_is_a_logged_json_500(serve_app, caplog):
    class BrokenBackend:
        mode = "none"

        def snapshot(self):
            raise RuntimeError("window corrupted")

        def liveness(self):
            return {"stalled": False}

        def ingest(self, sample):
            return sample

    served = serve_app(lambda engine: parts.app(BrokenBackend()))
    with caplog.at_level(logging.ERROR, logger="trainpulse_otel.api.errors"):
        status, headers, raw = served.send("GET", "/v1/snapshot")
    assert status == 500 and headers["Content-Type"] == "application/json"
    assert json.loads(raw) == {"error": "internal error; the daemon's log has the details", "field": None}
    assert any("window corrupted" in (r.exc_text or "") for r in caplog.records)
