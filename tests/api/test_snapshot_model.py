"""The typed snapshot: ``to_dict`` is the contract's JSON, ``from_dict`` reads a daemon's JSON back."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from tests import parts
from trainpulse_otel.diagnose.types import Diagnosis, Goodput, Health, RankLoss, RootCause, Signal
from trainpulse_otel.publish.snapshot import Snapshot, build_snapshot, history_from_dict, history_to_dict
from trainpulse_otel.samples import Frame, GpuSample, SampleError, TrainingSample, parse_training

SNAPSHOTS = Path(__file__).parent.parent / "fixtures" / "snapshots"
FIXTURES = ("straggler_8gpu", "thermal_16gpu", "host_only")
TRAINING = {
    "model_name": "llama-3-8b",
    "global_step": 7,
    "step_time_ms": 950.5,
    "tokens_per_sec": 1.1e6,
    "mfu": 0.41,
    "ranks": [
        {"rank": 0, "gpu_index": 0, "step_time_ms": 941.0},
        {"rank": 1, "gpu_index": 1, "step_time_ms": 1290.0, "hostname": "node-7"},
    ],
}
DIAGNOSIS = Diagnosis(
    ts=1764400100.0,
    health=Health(64.0, "degraded"),
    signals=(
        Signal(
            "rank_straggler",
            "warning",
            1764400005.0,
            "rank 1 is 37% slower than the median rank",
            {"rank": 1, "gpu_index": 1},
            {"ratio": 1.37},
        ),
    ),
    root_causes=(
        RootCause("straggler_rank", 0.82, "rank 1 is slow", ("rank_straggler",), {"rank": 1}, "cordon the node"),
    ),
)


def fixture(name: str) -> dict[str, Any]:
    return json.loads((SNAPSHOTS / f"{name}.json").read_text())


@pytest.mark.parametrize("name", FIXTURES)
def test_a_daemons_json_reads_back_to_exactly_that_json(name):
    data = fixture(name)
    snapshot = Snapshot.from_dict(data)
    assert snapshot.to_dict() == data
    assert Snapshot.from_dict(snapshot.to_dict()) == snapshot


def test_an_engines_snapshot_round_trips_through_its_json():
    engine = parts.engine()
    try:
        before = engine.snapshot()
        assert before.timestamp is None and before.frame is None
        assert Snapshot.from_dict(json.loads(json.dumps(before.to_dict()))) == before
        engine.ingest(parse_training(TRAINING))
        engine.tick()
        snapshot = engine.snapshot()
        data = json.loads(json.dumps(snapshot.to_dict()))
        assert Snapshot.from_dict(data) == snapshot
        assert data["training"]["ranks"][1] == {"rank": 1, "gpu_index": 1, "hostname": "node-7", "step_time_ms": 1290.0}
    finally:
        engine.close()


def test_to_dict_is_the_contract_shape():
    frame = Frame(
        ts=1764400100.0, gpus=(GpuSample(index=0, utilization_percent=97.0),), training=parse_training(TRAINING)
    )
    snapshot = build_snapshot(frame, DIAGNOSIS, "sim", ["sim"], uptime_s=12.34567)
    data = snapshot.to_dict()
    assert list(data) == [
        "timestamp",
        "mode",
        "collectors",
        "version",
        "gpus",
        "host",
        "training",
        "diagnosis",
        "uptime_s",
    ]
    assert data["gpus"] == [{"index": 0, "utilization_percent": 97.0}] and data["host"] is None
    assert data["uptime_s"] == 12.346 and data["diagnosis"] == DIAGNOSIS.to_dict()
    assert Snapshot.from_dict(data) == snapshot  # the diagnosis' time is the snapshot's timestamp
    assert "uptime_s" not in build_snapshot(None, Diagnosis(), "none").to_dict()


def test_keys_a_newer_daemon_adds_are_ignored():
    data = fixture("straggler_8gpu")
    newer = copy.deepcopy(data)
    newer["cluster"] = {"name": "eos", "partition": "batch"}
    newer["gpus"][0]["c2c_link_errors"] = 3
    newer["training"]["ranks"][0]["nvlink_retries"] = 3
    newer["diagnosis"]["goodput"]["productive_s"] = 812.0
    newer["diagnosis"]["signals"][0]["first_seen"] = 1.0
    assert Snapshot.from_dict(newer).to_dict() == data


def test_the_ranks_that_lose_the_most_read_back_and_an_older_daemons_goodput_has_none():
    goodput = Goodput(
        0.81,
        0.79,
        1712.4,
        {"straggler_rank": 38.6},
        (
            RankLoss(5, 612.4, {"compute": 604.9, "data": 7.5}, 0.0, "node-003", 5),
            RankLoss(2, 40.0, {"compute": 1.0, "data": 39.0}, 3.5),
        ),
    )
    snapshot = build_snapshot(Frame(ts=1764400100.0), replace(DIAGNOSIS, goodput=goodput), "sim")
    data = json.loads(json.dumps(snapshot.to_dict()))
    assert data["diagnosis"]["goodput"]["ranks"][1] == {
        "rank": 2,
        "lost_ms_per_step": 40.0,
        "lost_ms": {"compute": 1.0, "data": 39.0},
        "waited_ms_per_step": 3.5,
    }
    assert Snapshot.from_dict(data).diagnosis.goodput == goodput
    older = fixture("straggler_8gpu")
    del older["diagnosis"]["goodput"]["ranks"]
    assert Snapshot.from_dict(older).diagnosis.goodput.ranks == ()
    assert Snapshot.from_dict(fixture("straggler_8gpu")).diagnosis.goodput.ranks[0].lost_ms["compute"] == 604.9


def test_a_job_daemons_nodes_read_back_with_their_gpus_tagged_by_host():
    data = fixture("straggler_8gpu")
    data["nodes"] = [
        {
            "hostname": "node-021",
            "gpus": [{"index": 2, "temperature_celsius": 88.0}],
            "host": {"cpu_percent": 31.0},
            "last_seen": data["timestamp"] - 10.0,
            "report_interval_s": 2.0,
            "stale": True,
        }
    ]
    snapshot = Snapshot.from_dict(data)
    assert [(g.node, g.index) for g in snapshot.gpus if g.node] == [("node-021", 2)]
    assert snapshot.nodes[0].host.cpu_percent == 31.0 and snapshot.nodes[0].stale(data["timestamp"])
    assert snapshot.to_dict() == data


def test_a_bad_node_is_named():
    data = fixture("straggler_8gpu")
    data["nodes"] = [{"hostname": "node-1", "gpus": [{"index": "two"}], "last_seen": 1.0}]
    with pytest.raises(SampleError) as err:
        Snapshot.from_dict(data)
    assert err.value.field == "nodes[0].gpus[0].index"


def _set(path: tuple, value: Any) -> Callable[[dict], None]:
    def mutate(data: dict) -> None:
        target = data
        for key in path[:-1]:
            target = target[key]
        if value is KeyError:
            del target[path[-1]]
        else:
            target[path[-1]] = value

    return mutate


@pytest.mark.parametrize(
    ("mutate", "field"),
    [
        (_set(("gpus", 0, "index"), KeyError), "gpus[0].index"),
        (_set(("gpus", 2, "utilization_percent"), "high"), "gpus[2].utilization_percent"),
        (_set(("host", "cpu_count"), 0), "host.cpu_count"),
        (_set(("training", "step_time_ms"), "slow"), "training.step_time_ms"),
        (_set(("training", "ranks", 3, "rank"), KeyError), "training.ranks[3].rank"),
        (_set(("diagnosis", "signals", 1, "since"), "a while"), "diagnosis.signals[1].since"),
        (_set(("diagnosis", "root_causes", 0, "signals"), "rank_straggler"), "diagnosis.root_causes[0].signals"),
        (_set(("diagnosis", "health", "score"), KeyError), "diagnosis.health.score"),
        (_set(("diagnosis", "goodput", "ranks", 0, "rank"), 5.5), "diagnosis.goodput.ranks[0].rank"),
        (_set(("diagnosis", "goodput", "ranks", 0, "lost_ms", "data"), "x"), "diagnosis.goodput.ranks[0].lost_ms.data"),
        (_set(("diagnosis", "goodput", "ranks"), {}), "diagnosis.goodput.ranks"),
        (_set(("diagnosis",), KeyError), "diagnosis"),
        (_set(("mode",), 3), "mode"),
        (_set(("timestamp",), "now"), "timestamp"),
        (_set(("gpus",), {}), "gpus"),
    ],
)
def test_a_malformed_snapshot_names_the_field(mutate, field):
    data = fixture("straggler_8gpu")
    mutate(data)
    with pytest.raises(SampleError) as caught:
        Snapshot.from_dict(data)
    assert caught.value.field == field


def test_a_body_that_is_not_an_object_is_a_value_error():
    with pytest.raises(ValueError, match="must be a JSON object, got array"):
        Snapshot.from_dict([])


def test_history_frames_drop_the_ranks_and_read_back():
    training = parse_training(TRAINING)
    frames = (
        Frame(ts=1.0, training=training),
        Frame(ts=2.0, gpus=(GpuSample(index=3),)),
        Frame(ts=3.0, training=parse_training({"ranks": TRAINING["ranks"]})),
    )
    data = json.loads(json.dumps(history_to_dict(frames)))
    assert [f["timestamp"] for f in data["frames"]] == [1.0, 2.0, 3.0]
    assert "ranks" not in data["frames"][0]["training"]
    assert data["frames"][2]["training"] is None  # only per-rank data: nothing job-level left
    read = history_from_dict(data)
    assert read[0].training == TrainingSample(**{k: v for k, v in TRAINING.items() if k != "ranks"})
    assert read[1] == frames[1]


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({}, "frames"),
        ({"frames": [{"gpus": []}]}, "frames[0].timestamp"),
        ({"frames": [{"timestamp": 1.0}, {"timestamp": 2.0, "training": {"mfu": 3}}]}, "frames[1].training.mfu"),
    ],
)
def test_a_malformed_history_names_the_field(body, field):
    with pytest.raises(SampleError) as caught:
        history_from_dict(body)
    assert caught.value.field == field
