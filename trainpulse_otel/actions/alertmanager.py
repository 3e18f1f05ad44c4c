"""A command action that pages through Alertmanager: the signal's JSON in, one alert POSTed to ``/api/v2/alerts``.

``python -m trainpulse_otel.actions.alertmanager http://ALERTMANAGER:9093`` reads what an action is told on its
standard input and sends Alertmanager one alert named ``TrainPulseSignalRaised`` with the labels the shipped
route (``collector_config/alertmanager/alertmanager.yml``) groups and routes by — ``signal``, ``severity``,
``hostname``, ``rank``, ``gpu_index``, ``cause`` — the signal's message as its summary and the cause's
remediation as its description. It exits non-zero when Alertmanager refuses it (the action counts ``failed``).
"""

from __future__ import annotations

import json
import sys
import urllib.request
from collections.abc import Mapping, Sequence
from datetime import datetime, timezone
from typing import Any

ALERTNAME = "TrainPulseSignalRaised"
LABELS = ("signal", "severity", "hostname", "rank", "gpu_index")


def alert_of(told: Mapping[str, Any]) -> dict[str, Any]:
    """The Alertmanager alert of one action's JSON (empty labels left out, as Alertmanager wants)."""
    cause = told.get("cause") or {}
    labels = {"alertname": ALERTNAME, **{k: str(told.get(k) or "") for k in LABELS}, "cause": cause.get("cause", "")}
    described = " ".join(part for part in (cause.get("summary"), cause.get("remediation")) if part)
    started = datetime.fromtimestamp(float(told.get("ts") or 0.0), timezone.utc)
    return {
        "labels": {k: v for k, v in labels.items() if v},
        "annotations": {"summary": str(told.get("message") or told.get("signal")), "description": described},
        "startsAt": started.isoformat().replace("+00:00", "Z"),
    }


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) != 1 or not args[0].startswith(("http://", "https://")):
        print("usage: python -m trainpulse_otel.actions.alertmanager http://ALERTMANAGER:9093", file=sys.stderr)
        return 2
    body = json.dumps([alert_of(json.load(sys.stdin))]).encode()
    url = args[0].rstrip("/") + "/api/v2/alerts"
    request = urllib.request.Request(  # noqa: S310 - http(s) only, checked above
        url, data=body, method="POST", headers={"Content-Type": "application/json"}
    )
    try:
        with urllib.request.urlopen(request, timeout=10) as resp:  # noqa: S310 - http(s) only
            return 0 if resp.status < 300 else 1
    except OSError as exc:  # HTTPError and URLError are OSErrors
        print(f"alertmanager {url}: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
