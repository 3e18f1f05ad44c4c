"""A rank's heartbeat over REST: a ranks-only report is accepted, merged into the rank, and exported."""

from __future__ import annotations

import json

from prometheus_client.parser import text_string_to_metric_families

JSON = {"Content-Type": "application/json"}


def post(served, body: dict) -> int:
    status, _, _ = served.request("POST", "/v1/training", json.dumps(body).encode(), JSON)
    return status


def test_a_ranks_only_heartbeat_is_accepted_merged_and_exported(served):
    assert post(served, {"step_time_ms": 900, "ranks": [{"rank": 0, "gpu_index": 0, "step_time_ms": 850}]}) == 202
    beat = {"rank": 0, "global_step": 120, "phase": "all_reduce", "phase_since": 1764400000.5, "pid": 4242}
    assert post(served, {"ranks": [beat]}) == 202
    served.engine.tick()
    _, snap = served.get_json("/v1/snapshot")
    (rank,) = snap["training"]["ranks"]
    assert rank == {"rank": 0, "gpu_index": 0, "step_time_ms": 850.0, **beat}
    assert snap["training"]["step_time_ms"] == 900.0  # the job's report stands
    _, _, body = served.request("GET", "/metrics")
    series = {
        s.name: s
        for family in text_string_to_metric_families(body.decode())
        for s in family.samples
        if "rank" in s.name
    }
    assert series["trainpulse_rank_global_step"].value == 120
    assert series["trainpulse_rank_phase_since_seconds"].value == 1764400000.5
    phase = series["trainpulse_rank_phase"]
    assert phase.value == 1 and phase.labels["phase"] == "all_reduce" and phase.labels["process_pid"] == "4242"
