"""Any line at all: the reader never raises, every report it gives is valid, and every line is counted.

Lines are drawn from random text and from the forms the reader knows with their numbers replaced by anything
(NaN, negatives, huge, empty): a bad line is a line not understood, never an error or a poisoned report.
"""

from __future__ import annotations

import math

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from trainpulse_otel.logs import LogLine, LogReader
from trainpulse_otel.samples import LogEvent, TrainingSample

#: Real lines' shapes (the corpus's), a ``{}`` where a number stood.
FORMS = (
    "iter {}: loss {}, time {}ms, mfu {}%",
    " iteration {}/ 1000 | consumed samples: {} | elapsed time per iteration (ms): {} | lm loss: {} |",
    "{{'loss': {}, 'grad_norm': {}, 'learning_rate': {}, 'epoch': {}}}",
    "Epoch [{}][{}/3953]\tlr: 3.6e-06, time: {}, loss: {}, grad_norm: {}",
    "epoch       main/loss   validation/main/loss  elapsed_time",
    "{}           {}     {}               {}",
    "      Epoch    GPU_mem   box_loss   cls_loss   dfl_loss  Instances       Size",
    "      {}/20      {}G      {}      {}      {}          2        640: 100% 4/4 [00:01<00:00,  2.66it/s]",
    "Gradient overflow.  Skipping step, loss scaler 0 reducing loss scale to {}",
    (
        "[rank{}]:[E225 13:49:33.912673914 ProcessGroupNCCL.cpp:1595] [Rank {}] Watchdog caught collective operation "
        "timeout: WorkNCCL(SeqNum={}, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)={}) ran for {} milliseconds"
    ),
    "srun: error: node{}: task {}: Killed",
    "spark01:{}:{} [{}] misc/ibvwrap.cc:268 NCCL WARN Call to ibv_create_cq failed",
    "F0628 15:21:28.{} 1910 context_gpu.h:107] Check failed: error == cudaSuccess unspecified launch failure",
    "[2024-05-01 10:00:{}] step {} loss {} grad_norm {}",
    (
        "[2021-01-01 00:00:00,000] [INFO] [logging.py:60:log_dist] [Rank 0] OVERFLOW! Rank 0 Skipping step. Attempted "
        "loss scale: {}, reducing to {}"
    ),
    "[2020-08-20 14:38:13,808] [INFO] [timer.py:181:stop] {}/2000, SamplesPerSec={}",
    "Epoch {}:  39%|█████▍   | {}/12331 [05:59<09:15, {}it/s, loss={}, v_num=1]",
    "| WARNING: overflow detected, setting loss scale to: {}",
)
NUMBERS = st.one_of(
    st.integers(-(10**20), 10**20).map(str),
    st.floats(allow_nan=True, allow_infinity=True).map(repr),
    st.sampled_from(["nan", "NaN", "inf", "-inf", "", "1e999", "0x1F", "1,234,567", "--", "1/0", "٣"]),
)


@st.composite
def lines(draw: st.DrawFn) -> str:
    if draw(st.booleans()):
        return draw(st.text(max_size=300))
    form = draw(st.sampled_from(FORMS))
    return form.format(*(draw(NUMBERS) for _ in range(form.count("{}"))))


@settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(lines(), min_size=1, max_size=40))
def test_any_lines_are_read_without_error_into_valid_reports(texts):
    reader = LogReader()
    out = []
    for n, text in enumerate(texts, 1):
        out += reader.feed(LogLine(text, "excerpt.log", n))
    out += reader.flush()
    assert reader.stats.lines == len(texts)
    for item in out:
        assert isinstance(item, (TrainingSample, LogEvent))
        if isinstance(item, TrainingSample):
            assert math.isfinite(item.timestamp)
            for value in (item.step_time_ms, item.loss_scale, item.learning_rate):
                assert value is None or (math.isfinite(value) and value >= 0)
