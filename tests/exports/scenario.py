"""Inputs that exercise the export path: a raised signal, a full training report, every instrument."""

from __future__ import annotations

from dataclasses import replace

from trainpulse_otel.collect.base import Collected
from trainpulse_otel.diagnose.pipeline import PipelineResult
from trainpulse_otel.diagnose.types import Diagnosis, Goodput, Health, NodeRisk, RootCause, Signal, Transition
from trainpulse_otel.runtime.engine import Engine
from trainpulse_otel.samples import PORT_COUNTERS, NodeReport, PortSample, XidCount, parse_training


def straggler_raised(ts: float) -> PipelineResult:
    """What the pipeline returns on the tick a straggler is first seen (detectors live on another branch)."""
    subject = {"rank": 5, "gpu_index": 5}
    signal = Signal("rank_straggler", "warning", ts, "rank 5 is 38% slower than the median rank", subject)
    cause = RootCause(
        "straggler_rank",
        0.8,
        "rank 5 holds the job back",
        ("rank_straggler",),
        subject,
        "check GPU 5's clocks and host",
    )
    job = {  # a job restarted once, its saves seen: every figure of the life block
        "attempts": [{"start": ts - 900, "end": ts - 400, "first_step": 1, "last_step": 500, "end_reason": "failure"},
                     {"start": ts - 300, "end": None, "first_step": 401, "last_step": 700, "end_reason": None}],
        "ettr": 0.78,
        "recommended_checkpoint_interval_s": 412.0,
    }  # fmt: skip
    goodput = Goodput(0.81, 0.74, 1712.0, {"straggler_rank": 42.0, "unattributed": 3.5}, wall_s=900.0, job=job)
    risks = (NodeRisk("node-003", "mlx5_0/1", 0.35, ("link_degradation: symbol_error 50/s",)),
             NodeRisk("node-003", "node", 0.35, ("mlx5_0/1 0.35",)))  # fmt: skip
    diagnosis = Diagnosis(ts, Health(62.0, "degraded"), (signal,), (cause,), goodput, node_risk=risks)
    transition = Transition(ts, "raised", "rank_straggler", "warning", subject, signal.message)
    return PipelineResult(diagnosis, (transition,), top_cause_changed=True, scores={"rank_straggler": 1.38})


def straggler_cleared(ts: float) -> PipelineResult:
    """The tick the straggler is gone again: healthy, one cleared transition, no root cause."""
    transition = Transition(ts, "cleared", "rank_straggler", "warning", {"rank": 5, "gpu_index": 5})
    return PipelineResult(Diagnosis(ts), (transition,), top_cause_changed=True)


#: A training report with every contract field, so every training and rank instrument has a point.
FULL_TRAINING = {
    "timestamp": 1764400000.0,
    "workload_kind": "pretraining",
    "model_family": "llama",
    "model_name": "llama-3-8b",
    "framework": "megatron",
    "precision": "bf16",
    "hostname": "node-1",
    "global_step": 1200,
    "step_time_ms": 1450.0,
    "tokens_per_sec": 180000.0,
    "samples_per_sec": 44.0,
    "mfu": 0.41,
    "tflops": 390.0,
    "avg_seq_len": 3100.0,
    "max_seq_len": 4096.0,
    "data_wait_ms": 12.0,
    "tokenizer_wait_ms": 3.0,
    "sync_wait_ms": 40.0,
    "all_reduce_wait_ms": 95.0,
    "checkpoint_ms": 0.0,
    "checkpoint_load_ms": 0.0,
    "pipeline_bubble_ratio": 0.08,
    "loss": 2.1,
    "grad_norm": 0.9,
    "learning_rate": 3e-4,
    "world_size": 8,
    "global_batch_size": 256,
    "micro_batch_size": 2,
    "gradient_accumulation_steps": 16,
    "tensor_parallel_size": 2,
    "pipeline_parallel_size": 2,
    "data_parallel_size": 2,
    "loss_scale": 65536.0,
    "ranks": [
        {
            "rank": r,
            "gpu_index": r,
            "hostname": "node-1",
            "step_time_ms": 1300.0 + r,
            "tokens_per_sec": 22000.0,
            "data_wait_ms": 10.0,
            "sync_wait_ms": 30.0,
            "all_reduce_wait_ms": 90.0,
            # rank 7 diverged: its -inf loss (== itself, unlike NaN) is the training.nonfinite point, the others' are rank.loss points
            "loss": -float("inf") if r == 7 else 2.1 + r / 100,
            "grad_norm": 0.9,
            "global_step": 1200,
            "phase": "all_reduce",
            "phase_since": 1764399999.5,
            "pid": 4100 + r,
        }
        for r in range(8)
    ],
}


#: A ConnectX-6 HDR port with every counter the samples keep.
HDR_PORT = PortSample("mlx5_0", 1, "ACTIVE", "LinkUp", 200.0, "InfiniBand", tuple((n, 0) for n in PORT_COUNTERS))


def exercise_every_instrument(engine: Engine) -> None:
    """Give every instrument of the engine a point: sim hardware, a full report, a diagnosis with a cause,
    a refused request, a failed collection and an OTLP request's points (the caller has ticked a sim engine at least once)."""
    gpus = tuple(g for g in engine.latest.current().gpus or () if g.node is None)  # this node's own
    if gpus:  # one XID, so the XID counter has a series
        engine.latest.put(Collected(gpus=(replace(gpus[0], xid_errors=(13,)), *gpus[1:])), engine.clock())
    engine.latest.put(Collected(ports=(HDR_PORT,)), engine.clock())  # an HCA port: the ib.port series
    engine.ingest(parse_training(FULL_TRAINING), source="framework")
    heartbeat = {"ranks": [{"rank": 0, "global_step": 7, "phase": "compute", "phase_since": engine.clock()}]}
    engine.ingest(parse_training(heartbeat), source="rest")  # counted as a heartbeat, not a training sample
    if gpus:  # another node of the job, twice (its report interval needs two arrivals): the node series
        host = engine.latest.current().host
        node = NodeReport("node-021", gpus=gpus[:1], host=host, xid_counts=(XidCount(0, 79, 1),))
        engine.latest.put_node(node, engine.clock() - 2.0)
        engine.latest.put_node(node, engine.clock())
    engine.publisher.publish(straggler_raised(engine.clock()))
    engine.ops.rejected("malformed")
    engine.ops.collector_failed("nvml")
    engine.ops.otlp_received(accepted=3, rejected=1, ignored=2)
    engine.ops.logs_read(lines=10, unknown=4, reports=2, events=1)
    engine.ops.otlp_logs_received(accepted=5, rejected=1, ignored=2)
    engine.ops.action_done("run:drain", "ok")
    engine.ops.flush()  # accepted reports reach the instruments at the next tick or metrics read
