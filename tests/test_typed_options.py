"""The public calls' keyword options are typed: mypy catches a misspelt or mistyped option."""

from __future__ import annotations

import textwrap
import typing
from pathlib import Path

import attrs
import pytest

import alkstore
from alkstore.store import ConnectOptions
from typecheck import mypy_errors

SNIPPET = textwrap.dedent(
    """\
    import datetime as dt

    import alkstore


    def sync_calls(store: alkstore.Store) -> None:
        store.send("q", 1, priority=5, start_after=dt.timedelta(seconds=3))
        store.create_queue("q", exist_ok=True, retry_limit=3, dead_letter=None)
        store.update_queue("q", expire_seconds=60)
        store.send("q", 1, retires=3)  # line 10
        store.create_queue("q", retires=3)  # line 11
        store.update_queue("q", retires=3)  # line 12
        store.send("q", 1, priority="high")  # line 13
        alkstore.connect("postgresql://", pool_sise=3)  # line 14


    async def async_calls(store: alkstore.AsyncStore) -> None:
        await store.send("q", 1, priority=1)
        await store.send("q", 1, retires=3)  # line 19
        await store.create_queue("q", retires=3)  # line 20
        alkstore.connect_async("postgresql://", migrate=False, schemma="x")  # line 21
    """
)

EXPECTED = {10, 11, 12, 13, 14, 19, 20, 21}
"""Lines of the snippet with a misspelt or mistyped option, each of which mypy must report."""


def test_mypy_reports_every_misspelt_option_and_nothing_else(tmp_path: Path) -> None:
    errors = mypy_errors(tmp_path, SNIPPET)
    assert {line for line, _ in errors} == EXPECTED, errors
    messages = "\n".join(message for _, message in errors)
    assert 'Unexpected keyword argument "retires"' in messages
    assert 'Unexpected keyword argument "pool_sise"' in messages
    assert 'Unexpected keyword argument "schemma"' in messages


@pytest.mark.parametrize(
    ("typed", "validated"),
    [
        (alkstore.QueueOptionsKwargs, alkstore.QueueOptions),
        (alkstore.JobOptionsKwargs, alkstore.JobOptions),
        (alkstore.ConnectKwargs, ConnectOptions),
    ],
)
def test_each_typed_dict_names_exactly_the_options_validated_at_run_time(
    typed: type, validated: type
) -> None:
    assert set(typing.get_type_hints(typed)) == {f.name for f in attrs.fields(validated)}
