"""A node daemon pushing its own instruments over OTLP into a job daemon, both real processes on loopback.

The node runs ``trainpulse daemon -mode sim`` with the standard ``OTEL_*``
variables pointing its OTLP exporter at the job daemon (``-mode none``), over
HTTP/protobuf (``POST /v1/metrics``) or gRPC (``-otlp-grpc-addr``); the
job daemon's snapshot and Prometheus exposition then show the node's GPUs,
under ``nodes``, named by its ``host.name``.
"""

from __future__ import annotations

import re
import urllib.request

import pytest

from tests.cli.daemons import SimDaemon
from tests.exports.receivers import wait_until

pytestmark = pytest.mark.e2e

NODE = "node-sim-7"
GRPC_LISTENING = re.compile(r"OTLP/gRPC receiver listening on \S+:(\d+)")


@pytest.mark.parametrize("protocol", ["http/protobuf", "grpc"])
def test_a_node_daemons_otlp_export_reaches_the_job_daemons_view(start, protocol):
    job = start("-interval", "250ms", "-otlp-grpc-addr", "127.0.0.1:0", mode="none")
    assert wait_until(lambda: job.logged("OTLP/gRPC receiver listening on"))
    grpc_port = next(GRPC_LISTENING.search(line).group(1) for line in job.lines if GRPC_LISTENING.search(line))
    endpoint = job.url if protocol == "http/protobuf" else f"http://127.0.0.1:{grpc_port}"
    node = start(
        "-interval",
        "500ms",
        env={
            "OTEL_EXPORTER_OTLP_ENDPOINT": endpoint,
            "OTEL_EXPORTER_OTLP_PROTOCOL": protocol,
            "OTEL_EXPORTER_OTLP_INSECURE": "true",
            "OTEL_METRIC_EXPORT_INTERVAL": "1000",
            "OTEL_LOGS_EXPORTER": "none",  # the job daemon receives metrics; events go to a Collector
            "OTEL_RESOURCE_ATTRIBUTES": f"host.name={NODE}",
        },
    )
    snap = job.snapshot_when(lambda s: any(n["hostname"] == NODE and n["gpus"] for n in s.get("nodes", [])), 30)
    (node_view,) = snap["nodes"]
    assert [g["index"] for g in node_view["gpus"]] == list(range(8))
    assert all(g["name"] == "NVIDIA H100 80GB HBM3" and 0 <= g["utilization_percent"] <= 100 for g in node_view["gpus"])
    assert node_view["host"]["cpu_count"] >= 1 and not node_view["stale"]
    assert snap["gpus"] == []  # the job daemon runs on no GPU node: every GPU is the node's
    ranks = snap["training"]["ranks"] if snap["training"] else []
    own = node.get("/v1/snapshot")["training"]["ranks"]
    assert [(r["rank"], r["hostname"]) for r in ranks] == [(r["rank"], r["hostname"]) for r in own]  # as the node
    assert "signals" in node_view  # its daemon judges its GPUs and host, and sends its verdict along
    exposition = _metrics(job).splitlines()
    assert not _lines(exposition, "trainpulse_gpu_utilization_percent{", f'hostname="{NODE}"')  # the node's own
    assert _lines(exposition, "trainpulse_node_last_seen_seconds{", f'hostname="{NODE}"')  # its summary: the job's
    assert _lines(exposition, "trainpulse_otlp_points_total{", 'outcome="accepted"')
    assert job.get("/healthz")["status"] == "ok"


def _metrics(daemon: SimDaemon) -> str:
    with urllib.request.urlopen(daemon.url + "/metrics", timeout=10) as resp:
        return resp.read().decode()


def _lines(exposition: list[str], name: str, label: str) -> list[str]:
    return [line for line in exposition if line.startswith(name) and label in line]
