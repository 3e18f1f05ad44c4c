"""Gradient-boosting libraries' round lines: a boosting round is a step, the training set's metric its loss.

XGBoost's ``[50]\ttrain-rmse:1.02193\tvalid-rmse:1.14896`` (``validation_0-logloss:0.66``), LightGBM's
``[100]\ttraining's l2: 0.51\tvalid_1's l2: 0.62`` (``valid_0's l2: 2.3356e+09`` alone), CatBoost's ``100:\tlearn:
0.1697219\ttest: 0.1530068\tbest: 0.1530068 (100)\ttotal: 3.7s\tremaining: 33s``. The metric of the data set the
library trains on (``train``, ``training``, ``learn``, ``dtrain``) is the report's loss; a round that prints only
validation sets' metrics is a step with no training loss (the validation curve is not the training loss), as is one
whose metric grows as the model learns (AUC, NDCG, MAP, accuracy). The command-line tools' forms too: XGBoost's clock
before the round, LightGBM's ``[Info] Iteration:1, valid_1 ndcg@10 : 0.56``. Pure:
:func:`round_values` reads one line.
"""

from __future__ import annotations

import re

from .keys import Payload

#: XGBoost's and LightGBM's round: ``[50]`` (R's ``[50]:``) then tab-separated ``set-metric:value`` / ``set's metric:
#: value``;
#: XGBoost's command line puts its clock first (``[13:00:09] [0] train-ndcg@10:0.586  test-ndcg@10:0.545``).
ROUND = re.compile(r"^\s*(?:\[\d\d:\d\d:\d\d\] )?\[(\d+)\]:?\s(?=\s*\S+(?:-|'s )\S+?: ?[-+.\d])")
#: One data set's metric on such a line.
METRIC = re.compile(
    r"\s(?P<set>[\w.]+?)(?:-|'s )(?P<metric>[\w@.-]+): ?(?P<num>[-+]?(?:\d+\.?\d*|\.\d+)(?:e[-+]?\d+)?)"
)
#: LightGBM's command line: ``[LightGBM] [Info] Iteration:1, valid_1 ndcg@10 : 0.561739``.
LIGHTGBM_CLI = re.compile(
    r"\[Info\] Iteration:(\d+), (?P<set>\S+) (?P<metric>\S+) : (?P<num>[-+]?\d+\.?\d*(?:e[-+]?\d+)?)"
)
#: Metrics that grow as the model learns (ranking, classification): a step, never a loss.
GROWING = re.compile(r"^(?:auc|aucpr|ndcg|map|pre|acc(?:uracy)?|r2|f1)\b", re.IGNORECASE)
#: CatBoost's round: ``100:\tlearn: 0.1697219\ttest: …`` (a paste's tabs turned to blanks too).
CATBOOST = re.compile(r"^(\d+):\s+learn: ([-+]?\d+\.?\d*(?:e[-+]?\d+)?)\s")
#: The data sets a library trains on, by the names it prints.
TRAINING_SETS = frozenset(("train", "training", "learn", "dtrain"))


def round_values(text: str) -> Payload | None:
    """A boosting round's report (``global_step``, and ``loss`` where the training set's metric is printed), or
    None: not a round's line."""
    if text[:1] in "[ " and (match := ROUND.match(text)) is not None:
        payload: Payload = {"global_step": int(match[1])}
        for metric in METRIC.finditer(text):
            if metric["set"].lower() in TRAINING_SETS:
                _put_loss(payload, metric)
                break
        return payload
    if "] Iteration:" in text and (match := LIGHTGBM_CLI.search(text)) is not None:
        payload = {"global_step": int(match[1])}
        if match["set"].lower() in TRAINING_SETS:
            _put_loss(payload, match)
        return payload
    if text[:1].isdigit() and (match := CATBOOST.match(text)) is not None:
        return {"global_step": int(match[1]), "loss": float(match[2])}
    return None


def _put_loss(payload: Payload, metric: re.Match[str]) -> None:
    """The training set's metric as the report's loss, where it is one (an error, not a score that grows)."""
    if GROWING.match(metric["metric"]) is None:
        payload["loss"] = float(metric["num"])
