"""Libraries' own one-line progress forms that reading a line's ``key value`` pairs gets wrong.

PyTorch's DDP tutorial (pytorch/examples ``distributed/ddp-tutorial-series``) prints ``[GPU0] Epoch 3 | Batchsize:
32 | Steps: 64`` as each epoch begins, and nothing else: ``Steps`` counts the epoch's batches, so the run's step is
epoch x steps, with no loss. Deeplearning4j's ``ScoreIterationListener`` prints ``Score at iteration 100 is
1.3935213258387884``: DL4J's score is the minibatch's loss. Ray Tune prints each trial's result as an indented
block (``Result for PPO_CartPole_00000:`` … ``training_iteration: 5``): its iteration is the run's progress.
Trax's training loop prints each metric on a line of its own, ``Step    100: train CrossEntropyLossWithLogSoftmax |
9.85205269`` (``eval`` ones beside): the training loss where the metric is a loss, else the step alone.
DARTS and the NAS searches forked from it log ``train 050 2.102813e+00 20.649511 72.671570`` (the step in its
epoch, the mean loss, top-1 and top-5). Karpathy's makemore (Neural Networks: Zero to Hero) prints ``  10000/ 200000: 2.0576``: the step of its total, then
the loss. Lightning's ``ModelCheckpoint(verbose=True)`` says ``Epoch 3, global step 400: 'val_loss' reached 0.157 (best
0.157), saving model to …`` (or ``… was not in top 1``) at each validation: the step it reached. Pure:
:func:`listener_values` reads one line (:func:`bare_values` one that names nothing).
"""

from __future__ import annotations

import re

from .keys import Payload

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
#: makemore's line: nothing but the step, its total and the loss.
STEP_OF_TOTAL_LOSS = re.compile(r"^\s*(\d+)/\s*(\d+): (\d+\.\d+|nan|inf)\s*$")
#: What such lines hold (the cheap test first).
MARKS = ("| Batchsize: ", "Score at iteration ", "training_iteration: ", ", global step ", ": train ")


def listener_values(text: str) -> Payload | None:
    """The report one of these libraries' lines gives (see the module docstring), or None."""
    if MARKS[0] in text and (begun := EPOCH_BATCHES.search(text)) is not None:
        return {"global_step": int(begun[1]) * int(begun[2])}
    if MARKS[1] in text and (score := DL4J_SCORE.search(text)) is not None:
        return {"global_step": int(score[1]), "loss": float(score[2].replace("Infinity", "inf"))}
    if MARKS[2] in text and (tune := TUNE_ITERATION.match(text)) is not None:
        return {"global_step": int(tune[1])}
    if MARKS[3] in text and (saved := LIGHTNING_CHECKPOINT.search(text)) is not None:
        return {"global_step": int(saved[2])}
    if MARKS[4] in text and (trax := TRAX_METRIC.match(text)) is not None:
        said: Payload = {"global_step": int(trax[1])}
        if "Loss" in trax[2] or "loss" in trax[2]:
            said["loss"] = float(trax[3])
        return said
    return None


def bare_values(text: str) -> Payload | None:
    """makemore's ``  10000/ 200000: 2.0576`` or DARTS's ``train 050 2.102813e+00 20.64 72.67`` (lines that name
    neither a step nor a loss), or None."""
    if "train " in text and (darts := DARTS_TRAIN.search(text)) is not None:
        return {"global_step": int(darts[1]), "loss": float(darts[2])}
    if "/" not in text or (bare := STEP_OF_TOTAL_LOSS.match(text)) is None or int(bare[1]) > int(bare[2]):
        return None
    return {"global_step": int(bare[1]), "loss": float(bare[3])}
