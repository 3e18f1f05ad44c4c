"""Iteration lines of formats no framework parser claims, and numbers said in words: real lines of the corpus.

Every file here is an excerpt of the labelled corpus's ``train`` split (tests/fixtures/logs/corpus/index.json
cites each); the lines are read through :class:`~trainpulse_otel.logs.LogReader`, as a replay reads them.
"""

from __future__ import annotations

import math

import pytest

from tests.logs.excerpts import TRAIN, line_of, read_excerpt, reports
from trainpulse_otel.logs import LogLine, LogReader
from trainpulse_otel.logs.bars import progress_report
from trainpulse_otel.logs.boosting import round_values
from trainpulse_otel.logs.generic import PAIR, line_values
from trainpulse_otel.logs.keys import step_key
from trainpulse_otel.logs.statements import statement
from trainpulse_otel.logs.tables import table_header
from trainpulse_otel.samples import LogEvent, TrainingSample

# (corpus file, what its first report says: the line's own numbers, in the contract's fields and units)
FIRST_REPORTS = [
    # MaxText: ``completed step: 15107, seconds: 2.167, TFLOP/s: 36.722, loss: 2.191``
    ("maxtext_healthy_tpu-v3-completed-step.log", {"global_step": 15107, "loss": 2.191, "step_time_ms": 2167.0}),
    # pith-train: hyphenated keys, ``step-time 73.352 sec``, ``tokens-per-second 28,590``, zero-padded steps
    (
        "pith-train_healthy_zero-padded-step-pipes.log",
        {"global_step": 1, "loss": 2.6636, "step_time_ms": 73352.0, "tokens_per_sec": 28590.0, "grad_norm": 20.2657},
    ),
    # llama2.c: the step bare before the first ``|``, the step time a bare ``8060.78ms``, ``mfu 0.21%``
    (
        "llama2c_healthy_mps-pipe-format-eval.log",
        {"global_step": 490, "loss": 5.7543, "step_time_ms": 8060.78, "mfu": 0.0021},
    ),
    # torchvision's MetricLogger: the batch in its epoch (``Epoch: [27]  [ 0/31]``), ``time`` and ``data`` in s
    (
        "metriclogger_healthy_epoch-total-time-averaged-stats.log",
        {"global_step": 27 * 31, "loss": 0.0276, "step_time_ms": 3072.1, "data_wait_ms": 2981.5},
    ),
    # mmcv: ``Epoch [..][7400/...]\tlr: …, time: 0.517, data_time: 0.141, …, loss: 1.3138, grad_norm: 5.2039``
    ("mmcv_healthy_roi-trans-tab-after-iter.log", {"loss": 1.3138, "step_time_ms": 517.0, "grad_norm": 5.2039}),
    # a tuple repr: ``('epoch 1 step 10 / 50 ', …, 'step time: 0.17', …, 'train loss: 10.9936 ', 'val loss: …')``
    ("torchrun_healthy_ddp-tuple-repr-lines-wandb-summary.log", {"global_step": 10, "loss": 10.9936}),
    # modded-nanogpt: ``step:7374/7500 train_time:1725586ms step_avg:234.33ms`` — no loss, still the iteration's time
    ("modded-nanogpt_healthy_gpt2-medium-no-loss-field-tail.log", {"global_step": 7374, "step_time_ms": 234.33}),
    # torch_xla: ``Step=560 Loss=0.00318 … Time=07:29:59`` (a clock, no step time)
    ("torch-xla_healthy_tpu-four-devices-interleaved.log", {"global_step": 560, "loss": 0.00318, "step_time_ms": None}),
    # Keras 3: ``281/281 ━━━━ 5s 9ms/step - … - loss: 2.8028 - val_loss: …`` under an ``Epoch 2/20`` header
    ("keras_healthy_keras3-lstm-reuters-pycharm.log", {"global_step": 2 * 281, "loss": 2.8028, "step_time_ms": 9.0}),
    # OpenNMT-py: ``Step 5350/50000; acc:  51.25; ppl:  8.43; xent: 2.13; …`` (xent is the loss, ppl its exp)
    ("opennmt_nonfinite_loss_step5650-acc-0.19-ppl-nan-xent-nan.log", {"global_step": 5350, "loss": 2.13}),
    # SpeechBrain's train log: an epoch's summary, ``epoch: 1, lr: 1.95e-05 - train loss: 1.39 - valid loss: 1.39``
    ("speechbrain_healthy_moabb-eegnet-train-log-txt-confusion-matrix-lines.log", {"global_step": 1, "loss": 1.39}),
    # nnU-Net: an ``epoch:  6`` header, then ``…: train loss : -0.6584`` (a Dice loss: negative)
    ("nnunet_healthy_nnunet-v1-docker-epoch-blocks-negative-dice-loss.log", {"global_step": 6, "loss": -0.6584}),
    # StyleGAN2-ADA: ``tick 1401  kimg 5738.6  time 1d 06h 06m  sec/tick 71.0 …``, a tick its progress unit
    (
        "stylegan2-ada_healthy_stylegan2-ada-tf-tick-lines-snapshot-fid-augment.log",
        {"global_step": 1401, "step_time_ms": 71000.0},
    ),
    # InternEvo: ``loss/cn=nan`` beside ``tokens/cn=0`` is the mean of no tokens, not the model's NaN
    (
        "internevo_healthy_internlm-7b-demo-hybrid-zero-tflops-lines-per-language-loss-nan.log",
        {"global_step": 0, "loss": 11.641494750976562},
    ),
    # MONAI's GAN loop: ``epoch 0/100:recons loss: 0.023390,gen_loss: 0.292826,disc_loss: 0.244051`` — losses of
    # its own, none the loss: the epoch is progress
    ("monai_healthy_autoencoderkl-gan-training.log", {"global_step": 0, "loss": None}),
]


@pytest.mark.parametrize(("name", "expected"), FIRST_REPORTS, ids=[n.split("_", 1)[0] for n, _ in FIRST_REPORTS])
def test_a_line_with_a_step_and_a_loss_in_any_format_is_a_report(name, expected):
    found = reports(name)
    assert len(found) >= 3, f"{name}: {len(found)} report(s)"
    first = next((r for r in found if r.global_step is not None), found[0])  # past a summary's stepless line
    for field, value in expected.items():
        got = getattr(first, field)
        assert got == value or (value is not None and got is not None and math.isclose(got, value)), (field, got)


def test_a_non_finite_loss_like_value_is_a_report_wherever_it_stands():
    # verl's ``step:N - …`` line with a NaN loss; Dreamer's ``[5000] … / model_loss inf`` (no step key);
    # DeepSpeed-Chat's PPO ``act_loss: inf`` (an RL objective, not the training loss: only its being non-finite)
    verl = line_values("step:2 - global_seqlen/min:1234.000 - train/loss:nan - train/lr(1e-3):0.001")
    assert verl is not None and verl["global_step"] == 2 and math.isnan(verl["loss"])
    (dreamer,) = [r for r in reports("dreamer_nonfinite_loss_model-grad-norm-nan-inf.log") if not _finite(r)][:1]
    assert dreamer.global_step is not None
    ppo = [r for r in reports("deepspeed_nonfinite_loss_chat-step3-act-loss-inf.log") if not _finite(r)]
    assert ppo and ppo[0].global_step is not None


def test_an_evaluation_line_is_no_training_report_unless_its_numbers_are_gone():
    # an evaluation's loss alone; and the Trainer's ``{'eval_loss': nan, …}`` after the weights went NaN
    assert line_values("step 3000: val loss 4.0427") is None
    said = reports("huggingface_nonfinite_loss_time-train-py-eval-loss-nan-one-step.log")
    assert any(r.loss is not None and math.isnan(r.loss) for r in said)


def test_words_that_name_a_loss_or_a_gradient_non_finite_are_read():
    # real lines of the train split: TensorFlow's estimator, detectron2, a Megatron fork, fairseq's scaler
    cases = {
        "tensorflow_nonfinite_loss_tf-estimator-model-diverged.log": "Model diverged with loss = NaN",
        "detectron2_nonfinite_loss_floatingpointerror-traceback.log": "Loss became infinite or NaN",
        "megatron_nonfinite_loss_baichuan2-pp2-nan-local-grad-norm.log": "found NaN in local grad norm",
        "bigdl_nonfinite_loss_distrioptimizer-loss-is-infinity.log": "Loss is Infinity",
        "coot_nonfinite_loss_transformerxl-logsoftmaxbackward-returned-nan.log": "returned nan values",  # anomaly mode
    }
    for name, words in cases.items():
        line = next(text for text in (TRAIN / name).read_text().splitlines() if words in text)
        said = statement(line)
        assert said is not None and any(not math.isfinite(v) for v in said.values() if isinstance(v, float)), name
    # fairseq's scaler starts at 2^7 (its recipes at 4): its halvings are calibration, its scale is what is judged
    scale = statement("| WARNING: overflow detected, setting loss scale to: 0.125")
    assert scale == {"loss_scale": 0.125}
    # apex's scaler says the scale it left and the step it skipped: the detector judges warm-up from fault
    apex = "Gradient overflow.  Skipping step, loss scaler 0 reducing loss scale to 32768.0"
    assert statement(apex) == {"loss_scale": 32768.0, "skipped_steps": 1}
    # apex's warning comes with every overflow: no statement
    assert statement("Warning: NaN or Inf found in input tensor.") is None
    assert statement("node-1:12:34 [0] NCCL INFO Channel 00/32 :    0   1   2   3") is None
    # the value before the numbers: SlowFast's ``RuntimeError: ERROR: Got NaN losses 2021-10-28 …`` (train split);
    # a count or a check of NaN losses is no NaN
    name = "slowfast_nonfinite_loss_lemma-check-nan-losses-runtimeerror.log"
    line = next(text for text in (TRAIN / name).read_text().splitlines() if "Got NaN losses" in text)
    assert math.isnan(statement(line)["loss"])
    assert math.isnan(statement("Inf or NaN in the gradients of layer 3")["grad_norm"])
    assert statement("nan loss count: 0, inf loss check: on") is None
    # a trainer's own NaN guard, said in its words: fairchem's ``Found nans while computing loss`` (the corpus's train
    # split); ``NaN loss detected`` is its alarm, ``nan loss detection`` a setting
    line = line_of("fairchem_nonfinite_loss_uma-finetune-nans.log", "Found nans")
    assert math.isnan(statement(line)["loss"]) and math.isnan(statement("NaN loss detected at step 100")["loss"])
    assert statement("nan loss detection: on") is None


def test_keys_are_one_key_however_their_words_are_joined():
    for line in (
        "step 5 | grad norm 2.5 | loss 1.0",
        "step 5 | grad-norm 2.5 | loss 1.0",
        "step 5 grad_norm=2.5 loss=1",
    ):
        values = line_values(line)
        assert values is not None and values["grad_norm"] == 2.5 and values["global_step"] == 5


def test_lines_that_carry_no_iteration_are_not_reports():
    for line in (
        "loss_scale_window ............................... 1000",
        "Saving model at step 100 with loss 2.3",
        "{'loss': 'hinge', 'C': 0.1}",
        "2110848/2110848 ━━━━━━━━━━━━━━━━━━━━ 1s 0us/step",
    ):
        assert line_values(line) is None, line


def test_a_failure_line_is_still_a_failure_in_a_stream_read_as_any_format():
    reader = LogReader()
    out = reader.feed(LogLine("iter 10: loss 4.0863, time 561.94ms, mfu 15.34%", "x.log", 1))
    out += reader.feed(LogLine("Segmentation fault (core dumped)", "x.log", 2))
    assert [type(item) for item in out] == [TrainingSample, LogEvent]


def _finite(r: TrainingSample) -> bool:
    return all(v is None or math.isfinite(v) for v in (r.loss, r.grad_norm))


def test_a_value_word_is_no_key_and_a_gradient_norm_gone_nan_is_kept():
    cosy = line_values("2025-02-20 00:46:13,777 DEBUG TRAIN Batch 7/100 loss nan lr 0.00055784 grad_norm nan rank 2")
    assert cosy is not None and cosy["global_step"] == 7 and math.isnan(cosy["loss"]) and math.isnan(cosy["grad_norm"])
    assert cosy["learning_rate"] == 0.00055784  # ``nan lr`` is no key: ``lr`` is
    (*_, last) = reports("mmdet_nonfinite_loss_bevformer-epoch12-grad-norm-nan-finite-loss.log")
    assert (
        last.loss is not None and math.isfinite(last.loss) and last.grad_norm is not None and math.isnan(last.grad_norm)
    )


def test_the_best_loss_a_script_keeps_is_no_loss():
    assert line_values("{'best_train_loss': inf, 'best_valid_loss': inf, 'best_train_epoch': -1}") is None
    icefall = reports("icefall_healthy_yesno-tdnn-cpu-epochs.log")
    assert icefall and all(_finite(r) for r in icefall)
    assert [r.loss for r in icefall][:2] == [1.0789, 0.5356]  # the batch's loss, not the running total


TABLES = [
    # (corpus file, reports, the first report's step and loss)
    ("spacy_healthy_train-console-logger-table.log", 13, (0, 0.00 + 86.20)),
    ("chainer_healthy_chainermn-model-parallel-vgg16-printreport.log", 20, (1, 2.30032)),
    ("ultralytics_healthy_yolov8-colab-t4-20-epochs.log", 12, (1, 1.018 + 3.009 + 1.465)),
    ("yolov5_healthy_colab-cpu-cat-epochs-total-column.log", 5, (0, 0.1679)),
    # tab-separated, NumPy's one-value arrays in a cell (``[-2.17921662]``); its losses summed
    ("chainerrl_healthy_ppo-pong-scores-tsv-steps-episodes-mean-reward-losses.log", 6, (50099, 1.3991805288333001)),
    # Chainer's PrintReport with its validation columns blank between evaluations: read by where the cells stand
    ("espnet_healthy_chainer-reporter-esc-codes-first-200-iters.log", 2, (100, 626.687)),
]


@pytest.mark.parametrize(("name", "count", "first"), TABLES, ids=[t[0].split("_")[0] for t in TABLES])
def test_a_table_s_rows_are_reports_by_its_header(name, count, first):
    read = reports(name)
    assert len(read) == count
    assert (read[0].global_step, read[0].loss) == pytest.approx(first)


def test_a_header_without_a_step_or_loss_closes_the_table_and_words_are_no_header():
    assert table_header("      Epoch    GPU_mem   box_loss   cls_loss   dfl_loss  Instances       Size").columns
    assert table_header("  Class     Images  Instances      P          R      mAP50").columns == ()
    assert table_header("Layer (type)      Output Shape      Param #") is None
    assert table_header("loss went up after epoch 3") is None
    table = table_header("epoch       main/loss   validation/main/loss  elapsed_time")
    assert table.row("1           2.30032     1.93991               78.7839") == {"global_step": 1, "loss": 2.30032}
    assert table.row("all        66     73    0.0125") is None


def test_keras_s_epoch_line_with_its_val_twins_is_a_report_and_a_bracketed_key_is_a_key():
    # Keras 2 (verbose=2) under ``Epoch 3/10``: the training loss beside its ``val_`` twin
    keras = line_values("3093s - loss: 0.6163 - acc: 0.8242 - val_loss: 0.2946 - val_acc: 0.9136", epoch=3)
    assert keras is not None and keras["loss"] == 0.6163 and keras["global_step"] == 3
    # the training loss beside its evaluation twin, by any split's name (nanoGPT's evaluation, LLMs-from-scratch,
    # PEFT's example); two losses of the script's own that are no twins (a GAN's) are still none
    assert line_values("step 3000: train loss 4.0390, val loss 4.0427") == {"global_step": 3000, "loss": 4.039}
    assert line_values("Ep 1 (Step 000005): Train loss 1.174, Val loss 1.103") == {"global_step": 5, "loss": 1.174}
    assert line_values("epoch=0   train_loss_total=0.7970  eval_loss_total=0.6472") == {"global_step": 0, "loss": 0.797}
    assert "loss" not in (line_values("step 10 | d_loss 0.61 | val_g_loss 1.20") or {})
    # LION's trainer: ``| [Loss] nan | … | [step]   104 |``
    lion = line_values("- [R0] | E6 iter[ 14/ 15] | [Loss] nan | [exp] ./exp/0125 | [step]   104 | [url] none |")
    assert lion is not None and math.isnan(lion["loss"])


def test_a_loss_printed_as_an_array_with_a_nan_in_it_is_a_non_finite_loss():
    from trainpulse_otel.logs.statements import statement

    said = statement(
        "Pass 0, batch 500, loss [     nan 9.211133      nan      nan      nan      nan 9.210888      nan]"
    )
    assert said is not None and math.isnan(said["loss"])
    assert statement("Pass 0, batch 400, loss [ 9.351679   9.2102585  9.151485 ]") is None  # finite: no statement


def test_numbers_said_not_finite_in_words_and_icefall_s_small_grad_scale():
    from trainpulse_otel.logs.statements import statement

    # SpeechBrain's check (speechbrain.core), torch.nn.utils.clip_grad_norm_'s error, icefall's scaler warning
    said = statement("2023-06-14 13:04:41,744 - speechbrain.core - WARNING - Parameter is not finite: Parameter")
    assert said is not None and math.isnan(said["loss"])
    clip = "RuntimeError: The total norm of order 2.0 for gradients from `parameters` is non-finite, so it cannot be"
    assert math.isnan(statement(clip)["grad_norm"])
    scale = statement("2024-01-14 01:03:00,826 WARNING [train.py:1057] (2/4) Grad scale is small: 1.29e-26")
    assert scale == {"loss_scale": 1.29e-26}
    for plain in ("the learning rate is finite", "the definite article is not finite-state"):
        assert statement(plain) is None


def test_a_line_naming_one_loss_of_its_own_and_seconds_per_batch_is_a_report():
    """ClearerVoice's MossFormer (the corpus's train split): its only loss is ``Mask_Loss``, its time ``s/batch``."""
    line = "Train Epoch: 0/100 Step: 10/965 | 2.057s/batch | lr 5.0000e-04 || Mask_Loss 1.6780"
    assert line_values(line) == {"global_step": 10, "loss": 1.678, "learning_rate": 5e-4, "step_time_ms": 2057.0}
    # two losses of their own and no training loss named: which one is the job's is not the line's to say
    assert "loss" not in (line_values("step 10 | d_loss 0.61 | g_loss 1.20 | 0.5s/batch") or {})


def test_a_key_closed_by_is_is_the_key():
    """BigDL's optimizer (the corpus's train split): ``loss is 0.1296…`` is the loss."""
    line = (
        "2018-11-15 11:10:46 INFO  NCFOptimizer2$:251 - [Epoch 1 99385344/99385344][Iteration 1012][Wall Clock "
        "184.418117875s] loss is 0.12964652452085698, training cost 184.418117875s."
    )
    values = line_values(line)
    assert values is not None and values["global_step"] == 1012 and values["loss"] == pytest.approx(0.1296465245)


def test_a_terminal_s_colours_and_erasures_hide_no_stamp_and_split_no_key():
    """loguru and rich colour their lines; a paste shows the escape as ``ESC[`` or ``^[[``, a file holds the byte."""
    for line in (
        "\x1b[32m2024-05-01 10:00:05.000\x1b[0m | \x1b[1mINFO    \x1b[0m | step 10 | loss \x1b[36m2.3100\x1b[0m",
        "ESC[32m2024-05-01 10:00:05.000ESC[0m | ESC[1mINFO    ESC[0m | step 10 | loss 2.3100",
        "^[[32m2024-05-01 10:00:05.000^[[0m | ^[[1mINFO    ^[[0m | step 10 | loss 2.3100",
    ):
        reader = LogReader()
        reports = [r for r in reader.feed(LogLine(line, "x.log", 1)) + reader.flush() if isinstance(r, TrainingSample)]
        assert [(r.global_step, r.loss) for r in reports] == [(10, 2.31)], line
        assert reports[0].timestamp is not None and reports[0].timestamp % 60 == 5.0  # the stamp read, not lost


def test_a_bar_s_percentage_is_no_step_and_its_count_is():
    """diffusers' training scripts draw ``Steps:   0%|  | 4/3000 [01:30<14:00:18, 16.83s/it, loss=nan, lr=0.002]``
    (a Ray Train run of the train split): the step is the bar's count, not the ``0`` of its percentage."""
    name = "ray-train_nonfinite_loss_gaudi-hpu-textual-inversion-tqdm-loss-nan-from-step4.log"
    bars = [line for line in (TRAIN / name).read_text().splitlines() if line.startswith("Steps:") and "loss=" in line]
    steps = [line_values(line)["global_step"] for line in bars]
    assert steps == list(range(1, len(bars) + 1))
    assert math.isnan(line_values(bars[3])["loss"]) and line_values(bars[0])["step_time_ms"] == pytest.approx(41760.0)


def test_a_subset_s_nan_loss_beside_none_of_its_tokens_is_no_nan():
    line = "step=5 loss=9.2154 tokens/en=121223 tokens/cn=0 loss/en=9.1049 loss/cn=nan"
    assert line_values(line) == {"global_step": 5, "loss": 9.2154}
    assert math.isnan(line_values(line.replace("tokens/cn=0", "tokens/cn=12"))["loss"])


def test_mxnet_s_speedometer_line_is_a_report_of_its_epoch_s_throughput():
    name = "mxnet_healthy_mlperf-resnet-node-prefixed-speedometer-no-loss.log"
    line = next(text for text in (TRAIN / name).read_text().splitlines() if "Speed: " in text)
    assert line_values(line.split("Node[0] ", 1)[1]) == {"global_step": 1, "samples_per_sec": 11080.98}
    speeds = [r for r in reports(name) if r.samples_per_sec]  # (beside the steps MLPerf's epoch ends number)
    assert [r.global_step for r in speeds] == [1, 2]


def test_nan_as_consoles_spell_it_is_nan():
    # PaddleOCR pads with ``{:x<6f}``: a NaN loss prints ``nanxxx`` (a PGNet run of the train split)
    name = "paddleocr_nonfinite_loss_pgnet-e2e-loss-nanxxx-from-iter10.log"
    line = next(text for text in (TRAIN / name).read_text().splitlines() if "iter: 10," in text)
    assert math.isnan(line_values(line)["loss"]) and line_values(line)["global_step"] == 10
    # MSVC's runtime: ``-nan(ind)`` since 2015, ``1.#QNAN`` / ``1.#INF`` before
    assert math.isnan(line_values("step 5 loss -nan(ind) lr 0.1")["loss"])
    assert line_values("step 5 loss -nan(ind) lr 0.1")["learning_rate"] == 0.1
    assert math.isnan(line_values("iter 3 loss 1.#QNAN")["loss"])
    assert line_values("iter 4 loss -1.#INF")["loss"] == -math.inf


def test_a_tqdm_bar_alone_is_the_progress_of_a_log_that_prints_no_loss():
    # SageMaker's Accelerate script prints only its bar (``#015  3%|▎ | 2/79 [00:02<01:11,  1.07it/s]``); the
    # Trainer's dicts here carry no loss, so its bars are its progress: each a report of its step and step time
    for name in (
        "accelerate_healthy_sagemaker-seq2seq-mpirank-015-bars.log",
        "huggingface_healthy_trainer-step-throughput-dicts-no-loss.log",
    ):
        found = reports(name)
        assert len(found) >= 3, name
        assert all(r.step_time_ms is not None and r.step_time_ms > 0 for r in found), name
        steps = [r.global_step for r in found]
        assert steps == sorted(steps), name
    first = reports("huggingface_healthy_trainer-step-throughput-dicts-no-loss.log")[0]
    assert first.global_step == 2086 and math.isclose(first.step_time_ms, 1000.0 / 1.49)


def test_a_bar_that_is_not_training_or_says_no_rate_is_no_report():
    assert progress_report("Epoch 3:  45%|████▌     | 45/100 [00:10<00:12,  4.50it/s]") == {
        "global_step": 345,
        "step_time_ms": pytest.approx(1000.0 / 4.5),
    }
    assert progress_report(" 12%|█▏        | 3/25 [00:07<00:52,  2.40s/it]")["step_time_ms"] == pytest.approx(2400.0)
    assert progress_report("69it [01:19,  1.16s/it]") == {"global_step": 69, "step_time_ms": pytest.approx(1160.0)}
    for line in (
        "Downloading shards:  50%|█████     | 1/2 [00:30<00:30, 30.2s/it]",
        "Evaluating:  90%|█████████ | 9/10 [00:01<00:00,  8.1it/s]",
        "Map (num_proc=8):  40%|████      | 400/1000 [00:02<00:03, 180.00it/s]",
        "  0%|          | 0/79 [00:00<?, ?it/s]",
        " 45%|████▌     | 4.50k/10.0k [00:10<00:12, 450B/s]",
    ):
        assert progress_report(line) is None, line


def test_a_loop_s_own_line_that_begins_with_its_loss_is_a_report_without_a_step():
    # GraphNovo's ``loss:0.0074…, accuracy:0.997…`` and a Colab loop's ``Train Loss: 0.0068, Train Acc: 35.43``
    # (train split): the order of the lines is their time; an evaluation's loss beside it makes it none
    found = reports("custom-loop_healthy_graphnovo-bare-loss-accuracy-recall-precision-no-step.log")
    assert len(found) >= 10 and all(r.global_step is None and r.loss is not None for r in found)
    assert line_values("Train Loss: 0.0068, Train Acc: 35.43") == {"loss": 0.0068}
    assert line_values("loss: 0.41, val_loss: 0.52") is None
    assert line_values("The loss went down, accuracy: 0.9") is None


def test_keras_1_s_bare_epoch_header_numbers_its_batches_and_tensorflow_s_global_norm_is_said():
    # Keras 1.x (2015): ``Epoch 10`` alone above ``61878/61878 [====] - 6s - loss: 13.3614`` (train split)
    found = reports("keras_loss_spike_keras-2015-epoch10-loss-0.74-to-13.4.log")
    assert len(found) >= 10 and [r.global_step for r in found[:2]] == [61878, 2 * 61878]  # epoch 0, then 1
    assert math.isnan(
        statement("E check_numerics_op.cc:185] abnormal_detected_host = {1, 0} Found Inf or NaN global norm.")[
            "grad_norm"
        ]
    )


def test_a_loss_by_another_name_or_with_its_qualifiers_and_a_stepless_line_with_its_learning_rate():
    # GloVe's ``cost``, CNTK's ``ce``, a Rust loop's ``Epoch avg loss``, Trainium's ``step_loss`` beside its
    # ``learning_rate``, DJL's ``Train: … SoftmaxCrossEntropyLoss: 0.27``, Lua OpenNMT's ``Target tokens/s 1307``
    assert line_values("12/28/22 - 09:35.53PM, iter: 001, cost: 0.071355") == {"global_step": 1, "loss": 0.071355}
    cntk = line_values("Finished Epoch[ 2 of 8]: [Training] ce = 0.10104186 * 36001; errs = 2.280% * 36001")
    assert cntk is not None and cntk["global_step"] == 2 and cntk["loss"] == 0.10104186
    rust = line_values("Epoch avg loss: 0.0549 | Train Accuracy: 96.26% | Val Accuracy: 95.86%", epoch=1)
    assert rust is not None and rust["loss"] == 0.0549
    neuron = "LOG Thu Sep 29 22:30:22 2022 - (0, 80) step_loss : 9.0000  learning_rate : 1.60e-05  throughput : 2875.31"
    assert line_values(neuron) == {"loss": 9.0}
    assert line_values(neuron, stepless=False) is None  # a stream that numbers its steps: a summary's line is none
    assert line_values("Train: Accuracy: 0.92, SoftmaxCrossEntropyLoss: 0.27") == {"loss": 0.27}
    onmt = line_values("Epoch 1 ; Iter 150/213 ; LR 1.0000 ; Target tokens/s 1307 ; PPL 2249.66 ;")
    assert onmt is not None and onmt["global_step"] == 150 and onmt["tokens_per_sec"] == 1307.0
    assert line_values("step 10, time cost 1.2s, acc 0.5") == {"global_step": 10}  # a duration named cost: no loss


def test_iteration_lines_with_no_closing_bar_are_read_when_the_next_iteration_begins():
    """A script's own Megatron-like line with no closing ``|`` (not a terminal's wrap: the next line is the next
    iteration's) is a report; the last one, which the log may have cut, is left out."""
    reader = LogReader()
    lines = [
        f"iteration {i}/1000 | lm loss: {3 - i / 100:.3f} | elapsed time per iteration (ms): 412.5"
        for i in (10, 20, 30)
    ]
    out = [r for n, line in enumerate(lines, 1) for r in reader.feed(LogLine(line, "paste.log", n))] + reader.flush()
    told = [(r.global_step, r.loss, r.step_time_ms) for r in out if isinstance(r, TrainingSample)]
    assert told == [(10, 2.9, 412.5), (20, 2.8, 412.5)]


def test_pytorch_tutorial_epoch_batch_lines_count_their_batches_across_epochs():
    """``[epoch, batch] loss: x`` (PyTorch's CIFAR-10 tutorial): a step is the batch after the epochs before it."""
    reader = LogReader()
    lines = ["[1,  2000] loss: 2.197", "[1,  4000] loss: 1.874", "[2,  2000] loss: 1.523", "[2,  4000] loss: 1.470"]
    out = [r for n, line in enumerate(lines, 1) for r in reader.feed(LogLine(line, "paste.log", n))] + reader.flush()
    told = [(r.global_step, r.loss) for r in out if isinstance(r, TrainingSample)]
    assert told == [(2000, 2.197), (4000, 1.874), (6000, 1.523), (8000, 1.47)]


def test_pytorch_s_language_model_examples_count_an_epoch_s_batches_before_their_word():
    """``| epoch   1 |   200/ 2983 batches | lr 20.0000 | ms/batch 11.77 | loss  9.09 | ppl  8835.03`` (pytorch/examples'
    word_language_model, the nn.Transformer tutorial): each line a step, the epochs before it counted; an epoch's
    loss jumping 5.2 -> 7.6 is read (nlpia2's GRU run, the corpus's train split)."""
    said = line_values("| epoch   2 |   400/ 2983 batches | lr 20.0000 | ms/batch 11.85 | loss  5.65 | ppl   285.23")
    assert said is not None and said["global_step"] == 2 * 2983 + 400 and said["loss"] == 5.65
    told = [r for r in reports("pytorch_loss_spike_nlpia2-gru-wikitext2-epoch4.log") if r.loss is not None]
    steps, losses = [r.global_step for r in told], [r.loss for r in told]
    assert len(steps) == 70 and steps == sorted(steps) and losses[0] == 9.09  # (not argparse's ``Namespace(…)``)
    assert losses[losses.index(7.64) - 4 : losses.index(7.64) + 1] == [5.26, 5.52, 6.66, 7.55, 7.64]


@pytest.mark.parametrize(
    ("name", "first"),
    [
        ("xgboost_healthy_kaggle-sales-tab-rmse-every-50-early-stopping.log", (0, 1.40522)),  # train-rmse
        ("catboost_healthy_classifier-verbose-100-learn-test-best-total-remaining.log", (0, 0.656986)),  # learn:
    ],
)
def test_a_boosting_round_is_a_step_and_the_training_set_s_metric_its_loss(name, first):
    told = reports(name)
    assert (told[0].global_step, told[0].loss) == first and len(told) >= 5


def test_a_boosting_round_of_validation_sets_only_has_no_training_loss():
    assert round_values("[100]\tvalid_0's l2: 2.3356e+09") == {"global_step": 100}
    assert round_values("[10]\ttraining's binary_logloss: 0.5\tvalid_1's binary_logloss: 0.6") == {
        "global_step": 10,
        "loss": 0.5,
    }
    assert round_values("[5000] model_loss inf / value_loss 5.0") is None  # Dreamer's, read as any format
    # a validation metric whose name holds a loss word is still a round's (an XGBoost tutorial's output)
    assert line_values("[3]\tvalidation_0-mlogloss:1.41254") == {"global_step": 3}


def test_the_boosting_command_lines_rounds_are_steps_and_a_growing_metric_is_no_loss():
    """XGBoost's CLI puts its clock before the round, LightGBM's CLI says ``Iteration:1, valid_1 ndcg@10 : 0.56``
    (metarank's docs, the corpus's train split); NDCG, AUC and accuracy grow as the model learns: no loss."""
    xgb = reports("xgboost_healthy_metarank-cli-rank-pairwise.log")
    assert [r.global_step for r in xgb] == [0, 1, 2, 3, 4] and all(r.loss is None for r in xgb)
    lgb = reports("lightgbm_healthy_metarank-cli-lambdarank-warnings.log")
    assert [r.global_step for r in lgb[:3]] == [1, 2, 3]
    assert round_values("[LightGBM] [Info] Iteration:3, training l2 : 0.5") == {"global_step": 3, "loss": 0.5}
    assert round_values("[0]\ttrain-auc:0.91\teval-auc:0.88") == {"global_step": 0}


def test_a_line_numbering_its_step_alone_is_progress_and_a_line_with_nothing_is_not():
    told = reports("lightgbm_healthy_house-prices-5fold-l2-e-notation-early-stopping.log")  # valid_0's l2 only
    assert [r.global_step for r in told[:3]] == [100, 200, 300] and all(r.loss is None for r in told)
    reader = LogReader()
    assert reader.feed(LogLine("{'framework': 'huggingface'}", "x.log", 1)) == []
    assert reader.stats.reports == 0


@pytest.mark.parametrize(
    ("line", "said"),
    [
        # each trainer's own words for a NaN, as its source prints them (values filled in)
        ("Batch 3: Invalid loss, terminating training", "loss"),  # keras/src/callbacks/terminate_on_nan.py
        ("ValueError: Detected nan and/or inf values in `loss`. Check your forward pass", "loss"),  # Lightning 1.8
        ("FloatingPointError: gradients are Nan/Inf", "grad_norm"),  # fairseq/trainer.py
        ("TerminateOnNan: Output 'loss' contains NaN or Inf. Stop training", "loss"),  # ignite's TerminateOnNan
        ("(PreconditionNotMet) There are NAN or INF (num_nan=1, num_inf=0, num_zero=0) in tensor", "loss"),  # Paddle
        ("NaN detected (attempt 1/3), recovering from last.pt...", "loss"),  # ultralytics/engine/trainer.py
        ("[Megatron-FSDP](check_for_nan_in_grad=True) Detected NaN or Inf in wgrad: param.weight", "grad_norm"),
    ],
)
def test_a_trainer_s_nan_words_are_a_non_finite_value(line, said):
    value = (statement(line) or {}).get(said)
    assert value is not None and not math.isfinite(value)


@pytest.mark.parametrize(
    ("line", "scale"),
    [
        ("Check overflow, downscale loss scale to 0.5", 0.5),  # mmcv/runner/hooks/optimizer.py
        ("Overflow occurs, the loss scale is adjusted to 0.25", 0.25),  # ColossalAI's dynamic_grad_scaler.py
        ("AMP: overflow detected, setting scale to to 64.0", 64.0),  # fairseq/optim/amp_optimizer.py (sic)
        ("Overflow detected at step 3, ignoring gradient, decreasing loss scale from 8.0 to 4.0.", 4.0),  # fairseq2
        ("Gradient overflow.  Skipping step, reducing loss scale to 512.0", 512.0),  # apex/fp16_utils
    ],
)
def test_other_scalers_say_the_scale_an_overflow_left(line, scale):
    assert statement(line)["loss_scale"] == scale


def test_a_scaler_already_at_its_minimum_is_a_collapsed_scale():
    said = statement("Overflow detected at step 3, ignoring gradient, loss scale is already at minimum (0.0001).")
    assert said == {"loss_scale": 0.0001, "skipped_steps": 1, "global_step": 3}
    reader = LogReader()  # DeepSpeed says no value: its min_loss_scale default
    (told,) = reader.feed(
        LogLine("Current loss scale already at minimum - cannot decrease scale anymore. Exiting run.", "x", 1)
    )
    assert told.loss_scale == 1.0 and told.skipped_steps == 1


def test_fastai_s_table_with_its_clock_column_is_read():
    """fastai's console table (fastprogress's ConsoleMasterBar): a clock in its ``time`` column is a cell."""
    header = table_header("epoch     train_loss  valid_loss  error_rate  time")
    assert header is not None
    assert header.row("1         0.339507    0.204725    0.083333    00:07") == {"global_step": 1, "loss": 0.339507}


def test_a_loop_that_prints_no_loss_reports_its_step_by_its_reward_or_accuracy():
    """ML-Agents' trainer line (``ml-agents/mlagents/trainers/stats.py``'s console writer: ``Step: …. Time Elapsed:
    … s. Mean Reward: …``): its step is progress; an evaluation's accuracy beside a step is not."""
    assert line_values("Step: 10000. Time Elapsed: 20.5 s. Mean Reward: 1.2. Std of Reward: 0.4. Training.") == {
        "global_step": 10000
    }
    assert line_values("step 300 | train accuracy 0.91") == {"global_step": 300}
    assert line_values("step 300 | val accuracy 0.91") is None
    assert line_values("Step 300: saved the model with the best reward") is None
    # brain.js's ``train`` log: ``iterations`` counts the steps, its training error is the progress
    assert line_values("iterations: 10, training error: 0.05590719120980839") == {"global_step": 10}
    assert line_values("iterations: 10, validation error: 0.05") is None


def test_nccl_s_info_lines_are_no_report_but_a_bar_glued_before_one_is():
    reader = LogReader()
    chatter = "n124-137-109:312247:319408 [0] NCCL INFO comm 0x1 rank 0 nranks 8 cudaDev 0 busId 1000 - Init COMPLETE"
    assert reader.feed(LogLine(chatter, "job.log", 1)) == []
    glued = (
        "Steps:   0%|          | 1/500000 [12:44<14459:40:43, 104.11s/it, loss=0.36, lr=5e-6]"
        "n124-137-109:312247:326969 [0] NCCL INFO misc/socket.cc:829 -> 3"
    )
    [bar] = [r for r in reader.feed(LogLine(glued, "job.log", 2)) + reader.flush() if isinstance(r, TrainingSample)]
    assert bar.global_step == 1 and bar.loss == 0.36


def test_the_run_s_step_beside_an_epoch_s_iteration_numbers_the_report():
    """lion's trainer (``iter[ 14/ 15]`` the batch in its epoch, ``[step] 89`` the run's): every epoch's last batch
    is a new step, its NaN a report, and no silence is made of the same step read again 25 s later."""
    told = read_excerpt("lion_nonfinite_loss_hvae-loss-5e7-then-nan.log")
    steps = [r.global_step for r in told if isinstance(r, TrainingSample)]
    assert steps == [89, 104, 119, 134, 149] and not [e for e in told if isinstance(e, LogEvent)]


def test_a_non_finite_loss_is_reported_though_its_step_was_and_a_line_s_own_stamp_after_a_collector_s_is_cut():
    reader = LogReader()
    lines = [
        "2024-05-01T10:00:00.000000001Z 2024-05-01 09:59:59,120 | step 7 | loss 2.31",
        "2024-05-01T10:00:00.000000002Z 2024-05-01 09:59:59,121 | step 7 | loss nan",  # another rank's copy, gone NaN
    ]
    told = [o for n, text in enumerate(lines, 1) for o in reader.feed(LogLine(text, "pod.log", n))]
    assert [(r.global_step, r.timestamp) for r in told] == [(7, 1714557600.0), (7, 1714557600.0)]
    assert math.isnan(told[1].loss)


def test_the_ddp_tutorial_s_epoch_line_is_the_epoch_s_first_step():
    """pytorch/examples' ``ddp-tutorial-series`` prints ``[GPU0] Epoch 3 | Batchsize: 32 | Steps: 64`` (and, as
    users adapt it, ``GPU:0 | Epoch: 3 | …``) as each epoch begins: progress, with no loss."""
    assert line_values("[GPU1] Epoch 3 | Batchsize: 32 | Steps: 64") == {"global_step": 192}
    assert line_values("GPU:0 | Epoch: 1 | Batchsize: 32 | Steps: 32") == {"global_step": 32}
    told = reports("torchrun_healthy_multigpu-tutorial-epoch-batchsize-steps.log")
    assert [r.global_step for r in told[:3]] == [0, 32, 64]  # two ranks' copies of an epoch: one report


def test_dl4j_s_score_at_iteration_is_the_iteration_s_loss():
    """Deeplearning4j's ``ScoreIterationListener``: the score is the minibatch's loss; NaN as Java spells it."""
    told = reports("dl4j_healthy_dl4j-bilstm-windows-score-at-iteration.log")
    assert (told[0].global_step, told[0].loss) == (0, 1.6235184989295723) and told[1].global_step == 100
    nan = line_values("Score at iteration 7 is NaN")
    assert nan is not None and nan["global_step"] == 7 and math.isnan(nan["loss"])
    assert line_values("Best score at iteration 7: 0.5") is None


def test_ray_tune_s_result_block_says_its_iteration():
    """Ray Tune's ``Result for PPO_…:`` block (RLlib through Tune, the corpus's train split): ``training_iteration: N``
    alone on its line is the trial's progress; the key inside a sentence is not."""
    told = reports("rllib_healthy_deepcomp-ppo-tune-results.log")
    assert [r.global_step for r in told[:2]] == [1, 2]
    assert line_values("  training_iteration: 12") == {"global_step": 12}
    assert line_values("stop when training_iteration: 12 is reached") != {"global_step": 12}


def test_lightning_s_checkpoint_line_says_the_step_the_run_reached():
    """``ModelCheckpoint(verbose=True)``: ``Epoch 0, global step 1: 'val_loss' reached 0.33322 …`` (the corpus's
    train split); its value is the validation's, never the training loss."""
    told = reports("lightning_healthy_walkjump-checkpoint-per-epoch.log")
    assert [r.global_step for r in told[:3]] == [1, 2, 3] and all(r.loss is None for r in told)
    assert line_values("Epoch 7, global step 800: 'val_loss' was not in top 1") == {"global_step": 800}


def test_steps_a_second_are_the_step_time_s_reciprocal_and_two_losses_of_a_line_s_own_are_none():
    """Bagel's ``(step=0001201) Train Loss mse: 0.1647, Train Loss ce: 0.4438, Train Steps/Sec: 0.02``: a report by
    its throughput (which of its two losses is the job's is not the line's to say)."""
    said = line_values("(step=0001201) Train Loss mse: 0.1647, Train Loss ce: 0.4438, Train Steps/Sec: 0.04, ")
    assert said == {"global_step": 1201, "step_time_ms": 25000.0}


@pytest.mark.parametrize(
    ("name", "first"),
    [
        # Python logging's default prefix before a bracketed step (flax's seq2seq example through absl)
        ("flax_healthy_seq2seq-addition-absl-accuracy-loss-decode-lines.log", (100, 0.6936355233192444)),
        # Trax: each metric on a line of its own; the training loss where the metric is one
        ("trax_healthy_nmt-transformer-step-ran-train-steps-crossentropy-logsoftmax.log", (1, 9.85205269)),
        # makemore: ``      0/ 200000: 3.3167``, nothing named
        ("makemore_healthy_bare-step-of-200000-colon-loss-no-keyword.log", (0, 3.3167)),
        # EvoJAX: an evolution strategy's score, no loss
        ("evojax_healthy_brax-ant-iter-tests-score-avg-std-jit-of-pmap-warnings.log", (10, None)),
        # DARTS's search (its forks' too): ``train 050 2.232840e+00 20.710784 73.345588``, nothing named
        ("darts_healthy_dartspt-cifar10-search-train-step-obj-top1-top5-alpha-tensors.log", (0, 2.632253)),
        # LLMs-from-scratch: the training loss beside its evaluation twin
        (
            "llms-from-scratch_healthy_ch07-gpt2-instruction-finetune-ep-step-train-val-loss-sample-lines.log",
            (0, 2.637),
        ),
    ],
)
def test_round_seventeen_s_healthy_consoles_are_read(name, first):
    told = reports(name)
    assert (told[0].global_step, told[0].loss) == first and len(told) >= 3


def test_a_step_of_its_epoch_s_total_is_counted_after_the_epochs_before_it():
    """rasbt's deeplearning-models (the corpus's train split): ``Epoch: 002/040 | Batch 0050/0175 | Loss: 1.5473``
    starts its batch count again each epoch: every line is a report of the run's step, none another's copy, and
    an epoch's summary (``***Epoch: 002/040 | Train. Acc.: 42.819% | Loss: 1.505``) stands at the last step."""
    told = reports("pytorch_healthy_alexnet-cifar10-40-epochs-batch-loss-star-train-valid-acc-time-elapsed.log")
    steps = [r.global_step for r in told]
    assert steps[:5] == [0, 50, 100, 150, 175] and steps == sorted(steps) and len(told) == 40 * 4
    reader = LogReader()
    lines = [f"Epoch [{e}/2], Step [{s}/600], Loss: 0.5" for e in (1, 2) for s in (300, 600)]  # yunjey's tutorial
    out = [o for n, line in enumerate(lines) for o in reader.feed(LogLine(line, "x.log", n))]
    assert [o.global_step for o in out if isinstance(o, TrainingSample)] == [300, 600, 900, 1200]


def test_code_a_notebook_s_traceback_quotes_is_no_report():
    """IPython numbers the source lines it quotes (ModernBERT's Trainer traceback, the corpus's train split):
    ``   2530     # if loss is nan or inf simply add …`` is the Trainer's code, not a NaN of the run."""
    reader = LogReader()
    out = reader.feed(LogLine("   2530     # if loss is nan or inf simply add the average", "x.log", 1))
    out += reader.feed(LogLine("-> 2523     tr_loss_step = self.training_step(model, inputs)", "x.log", 2))
    assert out == [] and reader.stats.reports == 0
    assert line_values("   5 loss: nan") is not None  # a loop's own line: a step, one blank, its words


def test_a_step_key_counted_within_its_epoch_and_a_one_value_array():
    """Paddle's ``train: epoch: 1, batch_id: 20, loss is: [0.96110815]`` (PointNet in Paddle's docs, the corpus's train
    split): the batch starts again each epoch (counted after the epochs before it, by the last and the stride), the
    loss is a one-value array; MXNet's ``Batch [0-20]`` range is no array."""
    told = reports("paddle_healthy_pointnet-docs-train-val-banners-loss-in-brackets.log")
    steps = [r.global_step for r in told]
    assert steps[:6] == [0, 20, 40, 60, 80, 100] and steps == sorted(steps) and told[1].loss == 0.96110815
    assert line_values("Node[0] Epoch[2] Batch [0-20]\tSpeed: 11174.46 samples/sec")["global_step"] == 2


def test_an_rl_loop_s_episode_or_timestep_numbers_its_progress():
    """``Episode: 14994\tReward: -51`` (a LunarLander PPO, the corpus's train split); an environment's timestep wins
    over the episode's number, and any other step key over both."""
    assert [r.global_step for r in reports("ppo-pytorch_healthy_lunarlander-episode-reward-tab-lines.log")][:2] == [
        14994,
        14995,
    ]
    assert line_values("Episode 10  Timestep 2000  Reward 12") == {"global_step": 2000}
    assert line_values("Episode 5, step 300, loss 0.5") == {"global_step": 300, "loss": 0.5}


def test_round_nineteen_s_forms_a_record_s_sentinel_numpy_2_and_a_parenthesis_before_a_key():
    """``Validation Loss Decreased: inf => 1.221989. Saving Model …`` is a record leaving its sentinel, no infinite
    loss (a healthy VGG run, the corpus's train split); NumPy 2 prints ``np.float32(7.922645)``; llm-baselines'
    ``Train: Iter=50 (0.001 epochs) train_loss=7.399 iter_dt=5.33e-01s`` (the parenthesis closes no key)."""
    assert line_values("Validation Loss Decreased: inf => 1.221989. Saving Model to /x") is None
    assert statement("Validation loss decreased (inf --> 1.221989).  Saving model ...") is None
    assert line_values("{'train/learning_rate': np.float32(2.8e-05), 'train/loss': np.float32(7.922645)}") == {
        "loss": 7.922645
    }
    said = line_values("Train: Iter=50 (0.001 epochs) train_loss=7.399 iter_dt=5.33e-01s lr=1.75e-04")
    assert said == {"global_step": 50, "loss": 7.399, "step_time_ms": 533.0, "learning_rate": 0.000175}
    hugectr = line_values("Iter: 1000 Time(1000 iters): 2.163820s Loss: 0.134137")
    assert hugectr is not None and hugectr["loss"] == 0.134137  # a key's own parenthesis holds blanks
    assert not [
        r
        for r in reports(
            "pytorch_healthy_loguru-vgg16-transfer-phase-lines-bars-no-loss-until-summary-pycharm-exit-0.log"
        )
        if r.loss is not None and math.isinf(r.loss)
    ]


def test_a_value_inside_jax_s_or_tensorflow_s_scalar_is_the_value():
    """JAX prints a metric dict's scalars as ``Array(…, dtype=…)`` (a nanoGPT-in-JAX run log, code index 40027321952;
    a diffusion README's ``Last metrics``, 44311405578), 0.3's ``DeviceArray(…)``; TensorFlow's eager scalar is
    ``tf.Tensor(…)``, its repr ``<tf.Tensor: shape=(), dtype=float32, numpy=…>`` (a NaN in TF's own docs)."""
    pairs = [
        (m["key"], m["num"])
        for m in PAIR.finditer("{'accuracy': Array(15.780784, dtype=float32), 'loss': Array(5.3125")
    ]
    assert pairs == [("accuracy", "15.780784"), ("loss", "5.3125")]
    said = line_values("{'accuracy': Array(nan, dtype=float32), 'loss': Array(nan, dtype=float32)}")  # (Flax's docs)
    assert said is not None and math.isnan(said["loss"])
    said = line_values("step 300, train_loss=DeviceArray(0.6931, dtype=float32)")
    assert said == {"global_step": 300, "loss": 0.6931}
    said = line_values("Epoch 3: loss = <tf.Tensor: shape=(), dtype=float32, numpy=nan>")
    assert said is not None and math.isnan(said["loss"])
    said = line_values("step 12 loss tf.Tensor(2.3025851, shape=(), dtype=float32)")
    assert said == {"global_step": 12, "loss": 2.3025851}


def test_a_ruled_table_and_a_csv_one_are_read_by_their_cells():
    """A model card's ``Training results`` (code index 25420685530: ``No log`` until the first logged loss), a
    table drawn with rich's box lines, and the CSV a script prints (``print "epoch,train_loss,valid_loss,…"``, code
    index 33587634338; its words are no numbers)."""
    card = table_header("| Training Loss | Epoch | Step | Validation Loss | Accuracy | F1     |")
    assert card is not None and card.columns
    assert card.row("|:-------------:|:-----:|:----:|:---------------:|:--------:|:------:|") is None
    assert card.row("| No log        | 1.0   | 459  | 0.3519          | 0.8627   | 0.9    |") is None
    assert card.row("| 0.4872        | 2.0   | 918  | 0.6387          | 0.8333   | 0.8893 |") == {
        "global_step": 918,
        "loss": 0.4872,
    }
    boxed = table_header("┃ Step   ┃ Train Loss ┃ LR       ┃")
    assert boxed is not None and boxed.row("│ 200    │ 2.9000     │ 1.0e-04  │") == {"global_step": 200, "loss": 2.9}
    csv = table_header("epoch,train_loss,valid_loss,has_train_loss_improved,has_valid_loss_improved,duration")
    assert csv is not None and csv.row("3,0.6124,0.6388,True,False,41.2") == {"global_step": 3, "loss": 0.6124}
    assert table_header("Loading model, tokenizer, dataset") is None


def test_a_ruled_header_on_two_lines_is_read_cell_under_cell():
    """MATLAB's ``trainNetwork`` (the train split's three excerpts): ``Mini-batch`` over ``Loss``, ``Validation``
    over ``Loss``; the iteration column is the step, the mini-batch loss the loss."""
    top = table_header(
        "|  Epoch  |  Iteration  |  Time Elapsed  |  Mini-batch  |  Validation  |  Mini-batch  |  Validation  |"
    )
    assert top is not None and not top.columns  # no loss named yet: not a table by itself
    under = "|         |             |   (hh:mm:ss)   |   Accuracy   |   Accuracy   |     Loss     |     Loss     |"
    table = table_header(under, top)
    assert table is not None and table.row(
        "|       2 |          10 |       00:00:08 |       25.00% |       33.33% |       1.6979 |       1.6221 |"
    ) == {
        "global_step": 10,
        "loss": 1.6979,
    }
    assert table_header(under) is None  # a second line alone heads nothing
    assert len(reports("matlab_healthy_yolo-meal-detector.log")) == 61


def test_a_variable_s_name_for_the_epoch_numbers_its_line():
    """``num_epoch: 1, loss: 14.48055`` (OneFlow's L-BFGS PR, the corpus's train split)."""
    assert line_values("num_epoch: 2, loss: 6.732059") == {"global_step": 2, "loss": 6.732059}
    assert len(reports("oneflow_healthy_lbfgs-pr-100-epoch-num-epoch-loss-lines.log")) == 44


def test_round_twenty_s_forms_a_localized_epoch_header_catboost_s_pasted_round_and_deepmd():
    """``Эпоха 1/30`` numbering the ``Train Loss: 0.5623 | Val Loss: 0.3924`` after it, TensorFlow.js's ``Epoch 1 /
    100``, CatBoost's round whose tabs a paste turned to blanks (``87:     learn: …``, no srun label), DeePMD-kit's
    ``batch 1000 training time 14.99 s``: the corpus's train split."""
    russian = reports("pytorch_healthy_russian-console-early-stop.log")
    assert [r.global_step for r in russian[:3]] == [1, 2, 3] and russian[0].loss == 0.5623
    tfjs = reports("tensorflow-js_healthy_tfjs-node-translation-lstm.log")
    assert [r.global_step for r in tfjs[:2]] == [1, 2] and tfjs[0].loss == 1.10
    catboost = reports("catboost_healthy_gpu-iterations-early-stop-thread.log")
    assert [r.global_step for r in catboost[:2]] == [87, 88] and catboost[0].loss == 0.9540578
    deepmd = reports("deepmd-kit_healthy_licl-tutorial-batches.log")
    assert [r.global_step for r in deepmd[:3]] == [1000, 2000, 3000]


def test_a_nan_running_average_of_a_loss_and_a_step_with_losses_of_its_own():
    """SiamMask's ``siammask_loss: 6.079290 (nan)``: a NaN entered the running average; DeepSpeed-Chat's PPO line
    (``act_loss``, ``cri_loss``): the step, no one of them the loss (the corpus's train split)."""
    said = line_values(
        "INFO:global:Epoch: [6][16850/37500] lr: 0.005000\tbatch_time: 1.259789 (0.319867)\t"
        "rpn_loc_loss: 0.267109 (nan)\tsiammask_loss: 6.079290 (nan)"
    )
    assert said is not None and math.isnan(said["loss"])
    assert line_values("Epoch: [0]  [ 10/500]  lr: 0.0001  grad_norm: 1.2 (inf)  loss: 2.3100 (2.4000)")["loss"] == 2.31
    ppo = line_values(
        "epoch: 0|step: 259|ppo_ep: 1|act_loss: 0.0253753662109375|cri_loss: 0.2144775390625|unsuper_loss: 0.0"
    )
    assert ppo == {"global_step": 259}


def test_julia_s_show_of_the_loss_and_hasktorch_s_scalar_are_the_loss_and_inf_stays_inf():
    """Flux.jl's ``@show loss(x, y)`` under Julia's ``[ Info: Epoch 1`` (``87.793724f0``, a Float32) and Flux 0.x's
    tracked ``param(0.0913291)``; Hasktorch's ``Cost: Tensor Float []  39637.0000``: the corpus's train split."""
    assert line_values("loss(x, y) = param(0.0913291)") == {"loss": 0.0913291}
    epochs = reports("flux_healthy_julia-epochs-logitcrossentropy.log")
    assert [r.global_step for r in epochs[:2]] == [1, 2] and epochs[0].loss == pytest.approx(87.793724)
    assert reports("hasktorch_healthy_haskell-multiple-x-epoch-cost-tensor-float-every-100.log")[1].loss == 120.4294
    said = line_values("| epoch 001  7000 / 331737 loss=7746569234820.15 (126329286789.38), lr=1.25, gnorm=inf")
    assert said is not None and said["grad_norm"] == math.inf


def test_a_banner_naming_the_step_or_epoch_numbers_the_lines_after_it():
    """trl's PPO example prints ``------------------------------ STEP 0 ------------------------------`` and then
    its metrics (``rewards/mean: 0.25``) without a step (the corpus's train split); a loop's ``===== Epoch 3 =====``
    is one too, and a rule alone is none."""
    ppo = reports("trl_healthy_ysda-rlhf-ppo-step-banners-rewards-mean-kl-no-loss.log")
    assert [r.global_step for r in ppo[:3]] == [0, 1, 2]
    reader = LogReader()
    lines = ["==================== Epoch 3 ====================", "Train loss: 0.5123, Train acc: 0.81", "-" * 40]
    out = [r for n, t in enumerate(lines) for r in reader.feed(LogLine(t, "loop.log", float(n)))]
    assert [(r.global_step, r.loss) for r in out if isinstance(r, TrainingSample)] == [(3, 0.5123)]


def test_a_bar_of_unknown_total_numbers_the_loss_its_postfix_holds():
    """tqdm over an iterable with no length draws ``Training: 69it [01:19,  1.16s/it, loss=3.12]`` (its count, no
    total; ``set_postfix`` appends the loss): the count is the step of the postfix's loss on every line."""
    reader = LogReader()
    lines = [f"Training: {n}it [00:{n // 10:02d},  2.50it/s, loss={3.2 - n / 100:.2f}]" for n in (10, 20, 30)]
    out = [r for n, t in enumerate(lines) for r in reader.feed(LogLine(t, "bar.log", None))]
    assert [(r.global_step, r.loss) for r in out if isinstance(r, TrainingSample)] == [(10, 3.1), (20, 3.0), (30, 2.9)]


def test_round_twenty_one_s_forms_words_of_a_nan_an_epoch_s_time_and_a_regression_s_error():
    """TensorFlow 1's ``Nan in summary histogram for: …`` and a loop's ``print(loss)`` of ``tensor(nan, device=…)``
    say the model's numbers are gone (a finite ``tensor(3.2207, …)`` alone says nothing); JAX's docs' ``Epoch 0 in
    28.30 sec`` is the epoch and its time; Géron's custom loop's ``362/362 - mean: 3.54 - mean_absolute_error: 0.66``
    under ``Epoch 1/5`` is its progress: the corpus's train split."""
    assert statement("W tensorflow/core/framework/op_kernel.cc:1192] Invalid argument: Nan in summary histogram for: x")
    said = statement("tensor(nan, device='cuda:0', grad_fn=<NllLossBackward0>)")
    assert said is not None and math.isnan(said["loss"])
    assert statement("tensor(3.2207, device='cuda:0')") is None and statement("tensor([nan, 1.0])") is None
    chatglm = [
        e
        for e in read_excerpt("custom-loop_nonfinite_loss_chatglm-lora-tensor-nan.log")
        if isinstance(e, TrainingSample)
    ]
    assert chatglm and math.isnan(chatglm[0].loss)
    assert line_values("EPOCH 1 COMPLETED @ 10:07 PM") == {"global_step": 1}  # a Korean-English NMT run log's
    assert line_values("Epoch 2 in progress") is None
    jax = reports("jax_healthy_jax-docs-mnist-tfds-epochs.log")
    assert [(r.global_step, r.step_time_ms) for r in jax[:2]] == [(0, 28300.0), (1, 14740.0)]
    geron = reports("tensorflow_healthy_handson-ml3-custom-loop-status.log")
    assert [r.global_step for r in geron] == [1, 2, 3, 4, 5] and all(r.loss is None for r in geron)


def test_a_count_of_steps_named_by_its_words_is_the_step_but_a_total_is_not():
    """``Training steps : 8  parameter update loss :65.69851684570312`` (a VGG tutorial whose loss spikes to 41 then
    4e9 before its NaN, the corpus's train split); ``trainer.total_training_steps=1`` in verl's overrides is a setting."""
    said = line_values("Training steps : 8  parameter update loss :65.69851684570312 ")
    assert said == {"global_step": 8, "loss": 65.69851684570312}
    assert step_key("training_steps") and not step_key("trainer.total_training_steps") and not step_key("max_steps")
    vgg = reports("pytorch_loss_spike_tutorial-vgg-from-scratch-ci-render-6-to-41-to-4e9-then-nan.log")
    assert [r.loss for r in vgg[11:14]] == [6.062460899353027, 41.792266845703125, 73.97637939453125]


def test_an_epoch_more_than_one_before_the_last_counts_the_steps_again():
    """YOLOX's run log holds a run that ended (``Training of experiment is done``) and a new one from ``epoch: 1/120``
    (the corpus's train split): its steps start again, so its higher loss is a new series, not a spike."""
    yolox = reports("yolox_healthy_ptmnet-rerun-loss-resets.log")
    steps = [r.global_step for r in yolox]
    back = next(i for i in range(1, len(steps)) if steps[i] < steps[i - 1])
    assert steps[back] == 100 and yolox[back].loss == 15.2


def test_round_twenty_three_s_forms_an_all_loss_and_an_accuracy_beside_losses_of_its_own():
    """DFace's ``Epoch: 1, Step: 200, accuracy: 0.97, det loss: 0.113, bbox loss: 0.0239, all_loss: 0.125`` (the
    corpus's train split: its bbox loss later jumps to 51090): ``all_loss`` is the loss; Hung-yi Lee's HW11
    ``epoch   0: train D loss: 0.6985, train F loss: 1.9766, acc 0.2498``: the step, by its accuracy."""
    said = line_values(
        "Epoch: 1, Step: 200, accuracy: 0.97, det loss: 0.113, bbox loss: 0.0239, all_loss: 0.125, lr:0.01"
    )
    assert said is not None and said["global_step"] == 200 and said["loss"] == 0.125
    assert line_values("epoch   0: train D loss: 0.6985, train F loss: 1.9766, acc 0.2498") == {"global_step": 0}
    said = statement('"grad_norm": NaN,')  # a Trainer's trainer_state.json, pretty-printed: a key a line
    assert said is not None and math.isnan(said["grad_norm"]) and statement('"loss_scale": NaN') is None


def test_an_epoch_header_with_a_colon_numbers_the_iterations_counted_within_it():
    """``[2022-06-26 21:44:04,162]Epoch: 0002`` then ``iter:0020 loss_train: 1.1332 … time: 0.1688s`` (a GCN's run log,
    the corpus's train split): each epoch's iterations are counted after the epochs before, not dropped as copies
    of the first epoch's (whose stamped lines then read as a stall on a healthy run)."""
    gcn = reports("pytorch_healthy_gcn-graph-classification.log")
    steps = [r.global_step for r in gcn]
    assert steps == sorted(steps) and len(set(steps)) == len(steps) > 14


def test_pytorch_s_rnn_tutorials_progress_and_a_cross_entropy_are_read():
    # the classifier's ``5000 5% (0m 12s) 2.4177 Coelho / Portuguese ✓``; the generator's and seq2seq's
    assert line_values("5000 5% (0m 12s) 2.4177 Coelho / Portuguese ✓") == {"global_step": 5000, "loss": 2.4177}
    assert line_values("0m 17s (5000 5%) 3.0839") == {"global_step": 5000, "loss": 3.0839}
    assert line_values("1m 47s (- 25m 8s) (5000 6%) 2.8557") == {"global_step": 5000, "loss": 2.8557}
    [*_, gone] = reports("pytorch_nonfinite_loss_char-rnn-classification-tutorial.log")
    assert math.isnan(gone.loss)
    # OpenUnReID's ``cross_entropy 3.257 (3.978)`` beside its other terms: a loss by its name
    said = line_values("Epoch: [64][360/400]\tTime 0.188 (0.422)\tAcc@1 45.31% (82.93%)\tcross_entropy nan (nan)")
    assert said is not None and math.isnan(said["loss"])


def test_a_loss_said_at_its_step_is_read_and_keras_s_checkpoint_leaving_inf_is_no_loss():
    # TensorFlow's word2vec tutorial; a course's loop; an evaluation's is none
    assert line_values("Average loss at step  2000 :  4.37") == {"global_step": 2000, "loss": 4.37}
    assert line_values("Training loss at epoch 0 is 0.7040774178330915") == {
        "global_step": 0,
        "loss": 0.7040774178330915,
    }
    assert line_values("Validation loss at epoch 3: 0.5") is None
    # Keras's ModelCheckpoint(verbose=1): the record's starting inf, not the run's loss
    assert line_values("Epoch 1: val_loss improved from inf to 1.50455, saving model to checkpoint.ckpt") is None
    # SCNet's summary: ``Grad`` is the gradient norm
    said = line_values("Train Summary | Epoch 3 | Loss=0.1654 | Grad=inf")
    assert said is not None and said["grad_norm"] == math.inf and said["loss"] == 0.1654


def test_horovod_s_synthetic_benchmark_iterations_are_progress_with_their_throughput():
    # ``mpirun --timestamp-output``'s stamp, Open MPI's tag, then Horovod's benchmark line
    assert line_values("Iter #3: 104.8 img/sec per GPU") == {"global_step": 3, "samples_per_sec": 104.8}
    read = reports("horovod_healthy_tf2-8pod-roce-benchmark.log")
    assert [r.global_step for r in read] == list(range(10)) and read[0].samples_per_sec == 108.0


def test_tensorflow_s_step_counter_gives_the_step_s_time_and_the_throughput_without_a_step():
    # StepCounterHook in Estimator and TPUEstimator logs: every log_step_count_steps, the rate over them
    assert line_values("global_step/sec: 9.84722") == {"step_time_ms": pytest.approx(1000 / 9.84722)}
    assert line_values("examples/sec: 315.111") == {"samples_per_sec": 315.111}
    assert line_values("global_step/sec: 0") is None  # no step made: no step's time
    read = reports("tf-estimator_healthy_bert-pretraining-step-rate.log")  # rates alone, no step line
    assert len(read) == 12 and all(r.global_step is None for r in read)
    assert read[0].step_time_ms == pytest.approx(1000 / 9.84722) and read[1].samples_per_sec == 315.111
