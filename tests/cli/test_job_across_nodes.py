"""One job across four nodes, every part a real process on loopback: four node daemons (``-mode sim
-sim-nodes 4 -sim-node-rank I``) push their own instruments over OTLP — three over HTTP/protobuf, one over
gRPC — to a job daemon (``-mode none``) that diagnoses the whole job.

A GPU overheating on node-002 — judged by node-002's own daemon, whose export carries its verdict — is the
job's top cause, named with that host and the global rank on it; a
node daemon killed with SIGKILL is ``node_unreachable`` within three of its export intervals plus a few
seconds, and the job's ``node_failure``; every daemon left stops cleanly on SIGTERM.
"""

from __future__ import annotations

import re
import signal
import time

import pytest

from tests.cli.daemons import SimDaemon
from tests.exports.receivers import wait_until

pytestmark = pytest.mark.e2e

NODES = 4
EXPORT_INTERVAL_S = 1.0
GRPC_LISTENING = re.compile(r"OTLP/gRPC receiver listening on \S+:(\d+)")


def node_env(endpoint: str, protocol: str) -> dict[str, str]:
    return {
        "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT": endpoint,
        "OTEL_EXPORTER_OTLP_PROTOCOL": protocol,
        "OTEL_EXPORTER_OTLP_INSECURE": "true",
        "OTEL_METRIC_EXPORT_INTERVAL": str(int(EXPORT_INTERVAL_S * 1000)),
        "OTEL_LOGS_EXPORTER": "none",  # the job daemon receives metrics; events go to a Collector
    }


def test_four_node_daemons_make_one_job_whose_fault_and_lost_node_are_named(start):
    job = start("-interval", "500ms", "-otlp-grpc-addr", "127.0.0.1:0", mode="none")
    assert wait_until(lambda: job.logged("OTLP/gRPC receiver listening on"))
    grpc_port = next(m.group(1) for line in job.lines if (m := GRPC_LISTENING.search(line)))
    nodes: list[SimDaemon] = []
    for rank in range(NODES):
        grpc = rank == 3
        endpoint = f"http://127.0.0.1:{grpc_port}" if grpc else f"{job.url}/v1/metrics"
        scenario = "thermal_instability" if rank == 2 else "healthy"
        flags = ("-sim-nodes", str(NODES), "-sim-node-rank", str(rank), "-scenario", scenario, "-warmup", "150s")
        env = node_env(endpoint, "grpc" if grpc else "http/protobuf")
        nodes.append(start("-interval", "1s", *flags, env=env))

    def whole_job(snap: dict) -> bool:
        ranks = (snap.get("training") or {}).get("ranks") or []
        return len(snap.get("nodes", [])) == NODES and len(ranks) == NODES * 8

    snap = job.snapshot_when(whole_job, 30)
    assert [n["hostname"] for n in snap["nodes"]] == [f"node-{i:03d}" for i in range(NODES)]
    assert all(len(n["gpus"]) == 8 and not n["stale"] for n in snap["nodes"])
    hosts = {r["rank"]: r["hostname"] for r in snap["training"]["ranks"]}
    assert hosts == {r: f"node-{r // 8:03d}" for r in range(NODES * 8)}  # global ranks, each on its node

    def top_cause(snap: dict) -> dict | None:
        causes = snap["diagnosis"]["root_causes"]
        return causes[0] if causes else None

    snap = job.snapshot_when(lambda s: (top_cause(s) or {}).get("cause") == "gpu_thermal_throttling", 40)
    assert top_cause(snap)["subject"] == {"gpu_index": 5, "hostname": "node-002", "rank": 21}
    assert "GPU 5 on node-002" in top_cause(snap)["summary"]
    # judged where the GPU is: node-002's daemon raised it, its export carried the verdict, the job took it
    hot = [s for s in snap["diagnosis"]["signals"] if s["name"] == "thermal_instability"]
    assert hot and all(s["evidence"].get("judged_by") == "node-002" for s in hot), hot
    (node2,) = [n for n in snap["nodes"] if n["hostname"] == "node-002"]
    assert any(s["name"] == "thermal_instability" and s["subject"]["gpu_index"] == 5 for s in node2["signals"])

    nodes[1].proc.send_signal(signal.SIGKILL)
    killed = time.monotonic()
    nodes[1].proc.wait(timeout=10)

    def unreachable(snap: dict) -> bool:
        return any(
            s["name"] == "node_unreachable" and s["subject"] == {"hostname": "node-001"}
            for s in snap["diagnosis"]["signals"]
        )

    snap = job.snapshot_when(unreachable, 3 * EXPORT_INTERVAL_S + 6)
    assert time.monotonic() - killed <= 3 * EXPORT_INTERVAL_S + 6
    assert {n["hostname"]: n["stale"] for n in snap["nodes"]}["node-001"] is True
    failure = next(c for c in snap["diagnosis"]["root_causes"] if c["cause"] == "node_failure")
    assert failure["subject"] == {"hostname": "node-001", "ranks": list(range(8, 16))}
    assert job.get("/healthz")["status"] == "ok"

    for daemon in (*nodes[:1], *nodes[2:], job):
        daemon.proc.send_signal(signal.SIGTERM)
    for daemon in (*nodes[:1], *nodes[2:], job):
        assert daemon.proc.wait(timeout=20) == 0, daemon.lines[-5:]
