"""A rule table applies in its order whatever order a payload's keys come in: the first present key wins its
field, whether the table is a tuple (its rules looked up by the keys present) or any other iterable."""

from __future__ import annotations

from trainpulse_otel.adapters.base import Fields, Rule

TABLE = (
    Rule("elapsed time per iteration (ms)", "step_time_ms"),
    Rule("elapsed time per iteration (s)", "step_time_ms", 1000.0),
    Rule("lm loss", "loss"),
    Rule("loss", "loss"),
)


def _applied(data: dict, rules) -> tuple[dict, dict]:
    fields = Fields(data)
    fields.apply(rules)
    return fields.out, fields.mapped


def test_the_first_rule_whose_key_is_present_wins_whatever_the_payload_s_order():
    data = {"loss": 2.0, "elapsed time per iteration (s)": 1.5, "lm loss": 2.5, "other": 1}
    out, mapped = _applied(data, TABLE)
    assert out == {"step_time_ms": 1500.0, "loss": 2.5}
    assert mapped == {"step_time_ms": "elapsed time per iteration (s)", "loss": "lm loss"}
    assert _applied(data, iter(TABLE)) == (out, mapped)  # a generator of rules: the same
    assert _applied({"loss": None, "lm loss": None}, TABLE) == ({}, {})  # a null is no value


def test_a_table_built_again_is_read_again():
    first = (Rule("a", "loss"),)
    assert _applied({"a": 1.0}, first)[0] == {"loss": 1.0}
    second = (Rule("b", "loss"),)  # a new tuple (an id may be reused once the old one is gone)
    assert _applied({"a": 1.0, "b": 2.0}, second)[0] == {"loss": 2.0}
