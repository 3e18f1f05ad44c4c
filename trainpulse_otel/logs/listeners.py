"""Libraries' own one-line progress forms that reading a line's ``key value`` pairs gets wrong.

- PyTorch's DDP tutorial (``ddp-tutorial-series``): ``[GPU0] Epoch 3 | Batchsize: 32 | Steps: 64`` as an epoch
  begins; ``Steps`` counts its batches, so the run's step is epoch x steps, with no loss.
- Deeplearning4j's ``ScoreIterationListener``: ``Score at iteration 100 is 1.39``; the score is the loss.
- Ray Tune's result block: ``training_iteration: 5`` on a line of its own, the trial's progress.
- Trax: ``Step    100: train CrossEntropyLossWithLogSoftmax |  9.85``, a metric a line; a loss is the loss.
- pytorch-CycleGAN-and-pix2pix: ``(epoch: 1, iters: 100, time: 0.507, data: 0.091) D_A: 0.201 G_A: 0.297 …``, every
  term a loss though none says so: the iteration in its epoch, and the terms' sum (the generators' and discriminators').
- Flower's server: ``fit progress: (1, 1.298, {'accuracy': 0.6792}, 8.577)`` after each federated round, the round
  reached (the loss is the centralised evaluation's).
- Lightning's ``ModelCheckpoint(verbose=True)``: ``Epoch 3, global step 400: 'val_loss' reached 0.157 …``, the
  step reached (the value is the validation's).
- Horovod's synthetic benchmarks: ``Iter #3: 104.8 img/sec per GPU``; TensorFlow's ``StepCounterHook`` (Estimators):
  ``global_step/sec: 9.84722``, ``examples/sec: 315.111`` (the step's time, the throughput; no step named).
- A loss said at its step: ``Average loss at step  2000 :  4.37``, ``Training loss at epoch 0 is 0.704``.
- An epoch's own line of its end: JAX's docs' ``Epoch 0 in 28.30 sec`` (the epoch is the step, its time the
  step's), ``EPOCH 1 COMPLETED @ 10:07 PM``.
- Lines that name nothing (:func:`bare_values`): DeePMD-kit's ``batch    1000 training time 14.99 s``, DARTS's
  ``train 050 2.102813e+00 20.64 72.67``, makemore's ``  10000/ 200000: 2.0576``, WaveGlow's ``123892:\t-5.480178833``,
  YOLACT's ``[ 10]    1000 || B: 2.486 | … | T: 6.209 || …`` and PyTorch's RNN tutorials' ``5000 5% (0m 12s) 2.4177
  …`` and ``0m 17s (5000 5%) 3.0839`` (each form's fields: docs/logs.md).

Pure: :func:`listener_values` reads one line.
"""

from __future__ import annotations

import re

from .keys import EVALUATION, Payload

#: The DDP tutorial's epoch line (and ``GPU:0 | Epoch: 3 | …`` as users adapt it).
EPOCH_BATCHES = re.compile(r"\bEpoch:? (\d+) \| Batchsize: \d+ \| Steps: (\d+)")
#: DL4J's ``ScoreIterationListener`` (``org.deeplearning4j.optimize.listeners``).
DL4J_SCORE = re.compile(r"\bScore at iteration (\d+) is ([-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?|NaN|-?Infinity)\b")
#: Ray Tune's result block's own line of its iteration.
TUNE_ITERATION = re.compile(r"^\s*training_iteration: (\d+)\s*$")
#: Lightning's ``ModelCheckpoint`` line.
LIGHTNING_CHECKPOINT = re.compile(r"\bEpoch (\d+), global step (\d+): '[^']+' (?:reached|was not in top)")
#: Trax's metric line (its ``train`` ones).
TRAX_METRIC = re.compile(r"^Step\s+(\d+): train\s+(\w+)\s+\|\s+([-+]?\d+\.?\d*(?:[eE][-+]?\d+)?|nan|inf)\s*$")
#: DARTS's ``logging.info('train %03d %e %f %f', step, objs.avg, top1.avg, top5.avg)``.
DARTS_TRAIN = re.compile(r"(?:^|\s)train (\d{3,}) ([-+]?\d\.\d+e[-+]\d+|nan|inf) \d+\.\d+ \d+\.\d+\s*$")
#: makemore's line: nothing but the step, its total and the loss; WaveGlow's, the step and the loss to nine places
#: (``"{}:\t{:.9f}".format(iteration, loss)``: ``123892:\t-5.480178833``, a negative log-likelihood; a rank's
#: ``print(loss.item())`` under ``srun -l``, ``3: 0.6931471805599453``, is none).
STEP_OF_TOTAL_LOSS = re.compile(r"^\s*(\d+)(?:/\s*(\d+):\s+([-+]?\d+\.\d+|nan|inf)|:\s+([-+]?\d+\.\d{9}|nan|inf))\s*$")
#: YOLACT's iteration line: ``[ 10]    1000 || B: 2.486 | C: 2.181 | M: 1.478 | S: 0.064 | T: 6.209 || ETA: …``
#: (the epoch, the iteration, each loss by its initial, ``T`` their total).
YOLACT = re.compile(r"^\s*\[\s*\d+\]\s+(\d+) \|\|[^|]*(?:\|[^|]*)*?\bT: ([-+]?\d+\.\d+|nan|inf)\b")
#: PyTorch's RNN tutorials' progress (the classifier's, then the generator's and seq2seq's): iteration and loss.
TUTORIAL_CLASSIFIER = re.compile(r"^(\d+) \d+% \(\d+m \d+s\) ([-+]?\d+\.\d+|nan|inf) ")
TUTORIAL_GENERATOR = re.compile(r"^\d+m \d+s (?:\(- ?-?\d+m \d+s\) )?\((\d+) \d+%\) ([-+]?\d+\.\d+|nan|inf)\s*$")
#: DeePMD-kit's display line.
DEEPMD_BATCH = re.compile(r"\bbatch\s+(\d+) training time \d+(?:\.\d+)? s\b")
#: An epoch's own line of its end, with its time or without: JAX's docs' ``Epoch 0 in 28.30 sec``, ``Epoch 3 finished
#: in 41.2s``, ``EPOCH 1 COMPLETED @ 10:07 PM``.
_SECONDS = r"(\d+(?:\.\d+)?) ?(?:s|secs?|seconds)\b"
EPOCH_DONE = re.compile(
    rf"^\s*Epoch (\d+)(?:/\d+)?:? (?:(?:completed?|finished|done|ended)\b(?: in {_SECONDS})?|(?:took|in) {_SECONDS})",
    re.IGNORECASE,
)
#: pytorch-CycleGAN-and-pix2pix's ``print_current_losses``: ``(epoch: 1, iters: 100, time: 0.507, data: 0.091) D_A:
#: 0.201 G_A: 0.297 cycle_A: 4.741 …`` (its own loss terms, by name only), and one term.
GAN_LOSSES = re.compile(r"^\s*\((?i:epoch): (\d+), iters: (\d+), time: [\d.]+, data: [\d.]+\) ((?:\w+: \S+ ?)+)$")
GAN_TERM = re.compile(r"(\w+): ([-+]?\d+\.?\d*(?:e[-+]?\d+)?|nan|inf)\b")
#: Flower's server after each federated round: ``fit progress: (1, 1.298, {'accuracy': 0.6792}, 8.577)`` (the round,
#: the centralised evaluation's loss and metrics, the time): the round reached.
FLOWER_ROUND = re.compile(r"\bfit progress: \((\d+), ")
#: A loss said at its step in a sentence: TensorFlow's word2vec tutorial's ``Average loss at step  2000 :  4.37``,
#: ``Training loss at epoch 0 is 0.704``, ``Loss at step 100: 2.31`` (an evaluation's is none).
LOSS_AT = re.compile(
    r"\b(?P<what>(?:[A-Za-z][\w ]{0,30}?)?loss) at (?:global )?(?:step|iteration|iter|epoch|batch|update)\s+(?P<step>\d+)"
    r"\s*(?:[:=,]\s*|is\s+|was\s+)(?P<num>[-+]?\d+\.?\d*(?:[eE][-+]?\d+)?|nan|inf)\b",
    re.IGNORECASE,
)
#: Horovod's synthetic benchmarks (``tensorflow2_synthetic_benchmark.py``, ``pytorch_synthetic_benchmark.py``, every
#: install's first test): ``Iter #3: 104.8 img/sec per GPU`` — the iteration and one worker's throughput.
HOROVOD_BENCHMARK = re.compile(r"\bIter #(\d+): (\d+(?:\.\d+)?) img/sec per (?:GPU|CPU|device)\b")
#: TensorFlow's ``StepCounterHook``: ``INFO:tensorflow:global_step/sec: 9.84722``, TPUEstimator's ``examples/sec:
#: 315.111`` after it (every ``log_step_count_steps`` steps: the rate over them, the step not said).
STEP_RATE = re.compile(r"\b(global_step|examples)/sec: (\d+(?:\.\d*)?(?:e[-+]?\d+)?)\s*$")


def listener_values(text: str) -> Payload | None:
    """The report one of these libraries' lines gives (see the module docstring), or None."""
    if "| Batchsize: " in text and (begun := EPOCH_BATCHES.search(text)) is not None:
        return {"global_step": int(begun[1]) * int(begun[2])}
    if "Score at iteration " in text and (score := DL4J_SCORE.search(text)) is not None:
        return {"global_step": int(score[1]), "loss": float(score[2].replace("Infinity", "inf"))}
    if "training_iteration: " in text and (tune := TUNE_ITERATION.match(text)) is not None:
        return {"global_step": int(tune[1])}
    if ", global step " in text and (saved := LIGHTNING_CHECKPOINT.search(text)) is not None:
        return {"global_step": int(saved[2])}
    if ("poch" in text or "POCH" in text) and (done := EPOCH_DONE.match(text)) is not None:
        said: Payload = {"global_step": int(done[1])}
        took = done[2] or done[3]
        return said if took is None else {**said, "step_time_ms": float(took) * 1000.0}
    if ", iters: " in text and (gan := GAN_LOSSES.match(text)) is not None:
        terms = [float(term[2]) for term in GAN_TERM.finditer(gan[3])]
        return {"global_step": int(gan[2]), "loss": sum(terms)} if terms else None  # (the sum: NaN with any term)
    if "fit progress: (" in text and (flower := FLOWER_ROUND.search(text)) is not None:
        return {"global_step": int(flower[1])}
    if "/sec: " in text and (rate := STEP_RATE.search(text)) is not None:
        value = float(rate[2])
        if rate[1] == "examples":
            return {"samples_per_sec": value}
        return {"step_time_ms": 1000.0 / value} if value > 0 else None
    if "img/sec per" in text and (bench := HOROVOD_BENCHMARK.search(text)) is not None:
        return {"global_step": int(bench[1]), "samples_per_sec": float(bench[2])}
    if "oss at " in text and (said := LOSS_AT.search(text)) is not None:
        return (
            None if EVALUATION.search(said["what"]) else {"global_step": int(said["step"]), "loss": float(said["num"])}
        )
    if ": train " in text and (trax := TRAX_METRIC.match(text)) is not None:
        said: Payload = {"global_step": int(trax[1])}
        if "Loss" in trax[2] or "loss" in trax[2]:
            said["loss"] = float(trax[3])
        return said
    return None


def bare_values(text: str) -> Payload | None:
    """makemore's ``  10000/ 200000: 2.0576``, WaveGlow's ``123892:\t-5.48``, YOLACT's ``[ 10]  1000 || … T: 6.2``,
    DARTS's ``train 050 2.102813e+00 20.64 72.67``, DeePMD-kit's ``batch 1000 training time 14.99 s`` or PyTorch's RNN
    tutorials' ``5000 5% (0m 12s) 2.4177 …`` (lines that name neither a step nor a loss), or None."""
    if " || " in text and (yolact := YOLACT.match(text)) is not None:
        return {"global_step": int(yolact[1]), "loss": float(yolact[2])}
    if " training time " in text and (deepmd := DEEPMD_BATCH.search(text)) is not None:
        return {"global_step": int(deepmd[1])}
    if "train " in text and (darts := DARTS_TRAIN.search(text)) is not None:
        return {"global_step": int(darts[1]), "loss": float(darts[2])}
    if "%" in text and (tutorial := TUTORIAL_CLASSIFIER.match(text) or TUTORIAL_GENERATOR.match(text)) is not None:
        return {"global_step": int(tutorial[1]), "loss": float(tutorial[2])}
    if ":" not in text or (bare := STEP_OF_TOTAL_LOSS.match(text)) is None:
        return None
    if bare[2] is not None and int(bare[1]) > int(bare[2]):
        return None
    return {"global_step": int(bare[1]), "loss": float(bare[3] or bare[4])}
