"""Stable-Baselines3's logger tables: a block of section rows is one report at its total timesteps, with its
learning rate and fps (its RL losses only where one is not finite); a two-column table no section opened is not
taken for one. The logs are the corpus's (its ``train`` split)."""

from __future__ import annotations

import math
from pathlib import Path

from trainpulse_otel.config import Settings
from trainpulse_otel.logs.sb3 import StableBaselinesLines
from trainpulse_otel.runtime import replay_logs

CORPUS = Path(__file__).resolve().parents[1] / "fixtures" / "logs" / "corpus" / "train"
PPO = CORPUS / "stable-baselines3_healthy_sb3-ppo-breakout-cpu-rollout-tables.log"

BLOCK = """-----------------------------------------
| time/                   |             |
|    fps                  | 74          |
|    total_timesteps      | 4096        |
| train/                  |             |
|    learning_rate        | 0.0003      |
|    loss                 | -0.0199     |
|    value_loss           | {value}     |
-----------------------------------------"""


def _feed(text: str) -> list[dict]:
    sb3, out = StableBaselinesLines(), []
    for i, line in enumerate(text.splitlines()):
        out += sb3.feed(line, float(i)) or []
    return out


def test_a_block_is_one_report_at_its_total_timesteps_its_rl_losses_a_fault_only_when_not_finite():
    assert _feed(BLOCK.format(value="0.049")) == [
        {"global_step": 4096, "timestamp": 1.0, "learning_rate": 0.0003, "samples_per_sec": 74.0}
    ]
    (bad,) = _feed(BLOCK.format(value="nan"))
    assert math.isnan(bad["loss"])  # a term of the objective gone NaN is the report's


def test_a_ppo_value_loss_swinging_fivefold_is_no_spike():
    # FinRL's PPO on stock data: train/loss 5.49, 25, 27, 5.18, 5.79, 19.4 over its first eight dumps
    done = replay_logs([str(CORPUS / "stable-baselines3_healthy_finrl-ppo-stock-trading.log")], Settings())
    assert done.reader.stats.reports >= 7 and done.result.diagnosis.signals == ()


def test_a_table_no_section_opened_is_not_sb3_s():
    sb3 = StableBaselinesLines()
    assert sb3.feed("|    loss                 | 0.5          |", 0.0) is None
    assert sb3.feed("-----------------------------------------", 0.0) is None


def test_a_ppo_run_replays_with_a_report_a_block_and_no_signal():
    done = replay_logs([str(PPO)], Settings())
    blocks = sum(1 for line in PPO.read_text().splitlines() if "total_timesteps" in line)
    assert done.reader.stats.reports == blocks > 3
    assert done.result.diagnosis.signals == ()


BASELINES = """----------------------------------
| approxkl           | 0.00045888976 |
| fps                | 228           |
| n_updates          | 450           |
| policy_loss        | {loss}        |
| total_timesteps    | 57600         |
| value_loss         | 401.4166      |
----------------------------------"""


def test_baselines_section_less_table_is_read_from_its_total_timesteps_row_then_from_its_rule():
    """OpenAI Baselines' logger (Stable-Baselines 2's): the same table without sections, keys sorted. The first
    table is known at its ``total_timesteps`` row (the rows above it, its fps, are lost: no report from it); every
    later one from its rule."""
    first, second = BASELINES.format(loss="-0.0001"), BASELINES.format(loss="nan").replace("57600", "57728")
    out = _feed(first + "\n0\n" + second)
    assert [r["global_step"] for r in out] == [57728]
    assert out[0]["samples_per_sec"] == 228.0 and math.isnan(out[0]["loss"])
    [finite] = _feed(first + "\n0\n" + first)
    assert finite.keys() == {"global_step", "timestamp", "samples_per_sec"}  # a finite RL objective is no loss
    assert StableBaselinesLines().feed("| value_loss | 401.4 |", 0.0) is None  # no total_timesteps: no claim
