"""Real log lines the follower tests write into files: a stamped Megatron run, one whose grad norm went NaN,
and an NCCL watchdog timeout."""

from __future__ import annotations

from pathlib import Path

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "logs"


#: Megatron-LM lines of a 2024 MoE run (NVIDIA/Megatron-LM#756, tests/fixtures/logs/SOURCES.md).
MEGATRON = (FIXTURES / "megatron" / "2024_stamped_moe.log").read_text().splitlines()


#: BigScience's Megatron-DeepSpeed iterations with a NaN loss: no ``lm loss``, ``grad norm: nan``
#: (bigscience-workshop/Megatron-DeepSpeed#396).
NAN_ITERATIONS = (FIXTURES / "megatron" / "2023_bigscience_grad_norm_nan.log").read_text().splitlines()


#: NCCL's watchdog on three ranks, torchrun's ``[rankN]:`` prefixes (tests/fixtures/logs/SOURCES.md).
WATCHDOG = (FIXTURES / "failures" / "2025_pg_guid_three_ranks.txt").read_text().splitlines()[0]
