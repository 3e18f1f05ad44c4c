"""The GPU-fault fields of a sample: validated with the field named, recorded and read back from a trace."""

from __future__ import annotations

import json

import pytest

from trainpulse_otel.collect.trace import read_trace
from trainpulse_otel.samples import GpuSample, SampleError, parse_gpus, to_dict

GOOD = {
    "index": 4,
    "ecc_corrected_errors": 1843,
    "ecc_uncorrected_errors": 2,
    "xid_errors": [79, 48, 79],
    "remapped_rows_pending": 1,
    "remapped_rows_failed": 0,
}


def test_fault_fields_parse_and_round_trip_in_the_order_seen():
    (gpu,) = parse_gpus([GOOD])
    assert gpu == GpuSample(
        index=4,
        ecc_corrected_errors=1843,
        ecc_uncorrected_errors=2,
        xid_errors=(79, 48, 79),
        remapped_rows_pending=1,
        remapped_rows_failed=0,
    )
    assert parse_gpus([to_dict(gpu)]) == (gpu,)
    assert parse_gpus([{"index": 0, "xid_errors": []}])[0].xid_errors == ()


@pytest.mark.parametrize(
    ("field", "value", "named"),
    [
        ("xid_errors", [79, 0], "gpus[0].xid_errors[1]"),
        ("xid_errors", [-13], "gpus[0].xid_errors[0]"),
        ("xid_errors", [79.5], "gpus[0].xid_errors[0]"),
        ("xid_errors", ["79"], "gpus[0].xid_errors[0]"),
        ("xid_errors", 79, "gpus[0].xid_errors"),
        ("xid_errors", [1] * 1025, "gpus[0].xid_errors"),
        ("ecc_corrected_errors", -1, "gpus[0].ecc_corrected_errors"),
        ("ecc_corrected_errors", 2.5, "gpus[0].ecc_corrected_errors"),
        ("remapped_rows_pending", True, "gpus[0].remapped_rows_pending"),
        ("remapped_rows_failed", -1, "gpus[0].remapped_rows_failed"),
    ],
)
def test_a_bad_fault_field_is_an_error_naming_it(field, value, named):
    with pytest.raises(SampleError) as err:
        parse_gpus([{**GOOD, field: value}])
    assert err.value.field == named


def test_a_trace_line_with_a_bad_xid_is_reported_by_number_and_the_rest_is_read():
    lines = [
        json.dumps({"ts": 1.0, "gpus": [GOOD]}),
        json.dumps({"ts": 2.0, "gpus": [{**GOOD, "xid_errors": [0]}]}),
        json.dumps({"ts": 3.0, "gpus": [{"index": 4, "xid_errors": [79]}]}),
    ]
    errors = []
    records = list(read_trace(lines, errors))
    assert [r.ts for r in records] == [1.0, 3.0]
    assert [e.lineno for e in errors] == [2] and "xid_errors[0]" in errors[0].message
    assert records[1].payload[0].xid_errors == (79,)
