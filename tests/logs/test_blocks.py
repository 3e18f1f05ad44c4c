"""A report printed over lines (Composer's and OLMo's consoles) is one report per header.

The lines are quoted from public documentation: llm-foundry's README (the search tool's code index, id 27144493:
``[batch=1/100]:`` blocks) and a cluster's OLMo-1B run notes (id 5670415037: ``[step=1/739328]`` blocks), read by
:class:`LogReader` as a replay reads them.
"""

from __future__ import annotations

from trainpulse_otel.logs import LogLine, LogReader
from trainpulse_otel.logs.blocks import MetricBlockLines
from trainpulse_otel.samples import TrainingSample

COMPOSER = """[batch=1/100]:
         Train LanguageCrossEntropy: 10.9736
         Train Perplexity: 58312.0586
         Train loss/train/total: 10.9736
[batch=2/100]:
         Train LanguageCrossEntropy: 10.9724
         Train Perplexity: 58243.8086
         Train loss/train/total: 10.9724
[batch=3/100]:
         Train LanguageCrossEntropy: 10.9745
         Train Perplexity: 58365.8047
         Train loss/train/total: 10.9745"""

OLMO = """[2024-04-17 09:42:26] INFO     [olmo.train:816, rank=0] [step=1/739328]
    train/CrossEntropyLoss=11.25
    train/Perplexity=76,631
    throughput/total_tokens=4,194,304
    System/Peak GPU Memory (MB)=42,133
[2024-04-17 09:42:38] INFO     [olmo.train:816, rank=0] [step=2/739328]
    train/CrossEntropyLoss=10.73
    train/Perplexity=45,773
    throughput/total_tokens=8,388,608
    throughput/device/tokens_per_second=45,538
    throughput/device/batches_per_second=0.0869"""


def reports(text: str) -> list[TrainingSample]:
    reader = LogReader()
    out = [r for n, line in enumerate(text.splitlines(), 1) for r in reader.feed(LogLine(line, "run.log", n))]
    return [r for r in out + reader.flush() if isinstance(r, TrainingSample)]


def test_composer_s_batch_blocks_are_one_report_each_with_the_total_loss():
    assert [(r.global_step, r.loss) for r in reports(COMPOSER)] == [(1, 10.9736), (2, 10.9724), (3, 10.9745)]


def test_olmo_s_step_blocks_take_the_cross_entropy_at_the_header_s_time():
    told = reports(OLMO)
    assert [(r.global_step, r.loss) for r in told] == [(1, 11.25), (2, 10.73)]
    assert told[1].timestamp - told[0].timestamp == 12.0


def test_a_block_ends_at_a_line_that_is_not_its_value_and_a_nan_loss_is_kept():
    blocks = MetricBlockLines()
    assert blocks.feed("[epoch=1][batch=5/5]:", 1.0) == []
    assert blocks.feed("\t Train loss/train/total: nan", 1.0) == []
    (told,) = blocks.feed("Saving checkpoint to ep1-ba5-rank0.pt", 2.0)
    assert told["global_step"] == 5 and told["loss"] != told["loss"]
    assert blocks.feed("another line", 3.0) is None
