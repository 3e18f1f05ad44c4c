"""``GET /v1/report``: the post-mortem page of the daemon's run so far (docs/report.md).

200 ``text/html`` (one self-contained page); 501 with a JSON error naming the ``report`` extra when matplotlib is
not installed; 404 when the daemon keeps no per-tick record.
"""

from __future__ import annotations

from typing import Any

from flask import Flask, Response

from .errors import ApiError


def register_report_route(app: Flask, backend: Any) -> None:
    """Install ``GET /v1/report`` over ``backend.run_series()``."""

    @app.get("/v1/report")
    def report() -> Response:
        from ..report.charts import EXTRA_HINT, MissingExtra, require
        from ..report.page import render_run

        try:
            require()
        except MissingExtra:
            raise ApiError(501, f"the report needs the 'report' extra: {EXTRA_HINT}", extra="report") from None
        series = backend.run_series()
        if series is None:
            raise ApiError(404, "this daemon keeps no record of its run")
        page = render_run(series, f"daemon ({backend.mode})")
        return Response(page, mimetype="text/html", headers={"Cache-Control": "no-store"})
