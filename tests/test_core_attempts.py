"""The core's rules for attempt-history entries and snoozes (no database)."""

from __future__ import annotations

import datetime as dt

import pytest

from alkstore import InvalidOptions, Snooze
from alkstore.core.attempts import MAX_MESSAGE, MAX_STACK, attempt_error, snooze_seconds


@pytest.mark.parametrize(
    ("output", "entry"),
    [
        ({"name": "E", "message": "m", "stack": "s"}, ("E", "m", "s")),
        ({"message": "job timed out"}, (None, "job timed out", None)),
        ({"name": 7, "message": ["x"], "extra": 1}, (None, None, None)),
        ("text", (None, "text", None)),
        ([1, "two"], (None, '[1, "two"]', None)),
        (3.5, (None, "3.5", None)),
        (None, (None, None, None)),
    ],
)
def test_an_entry_takes_what_the_output_says(output: object, entry: tuple[object, ...]) -> None:
    made = attempt_error(output)
    assert (made["name"], made["message"], made["stack"]) == entry


def test_an_entry_keeps_the_head_of_a_message_and_the_tail_of_a_stack() -> None:
    made = attempt_error(
        {"name": "E", "message": "a" * MAX_MESSAGE + "b", "stack": "c" + "d" * MAX_STACK}
    )
    assert made["message"] == "a" * MAX_MESSAGE + "…"
    assert made["stack"] == "…" + "d" * MAX_STACK


@pytest.mark.parametrize(
    ("given", "seconds"),
    [(0, 0.0), (1.5, 1.5), (dt.timedelta(hours=1), 3600.0), (365 * 86_400, 31_536_000.0)],
)
def test_snooze_seconds(given: object, seconds: float) -> None:
    assert snooze_seconds(given) == seconds
    assert Snooze(given).seconds == seconds  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "given", [-0.1, 365 * 86_400 + 1, float("inf"), False, "1", None, dt.timedelta(days=-1)]
)
def test_bad_snoozes_name_the_value(given: object) -> None:
    with pytest.raises(InvalidOptions) as caught:
        Snooze(given)  # type: ignore[arg-type]
    assert caught.value.field == "seconds" and caught.value.value == given
