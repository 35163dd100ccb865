"""How the SQL engines store a job's trace context: a lone W3C ``traceparent`` compactly (the
row is rewritten on every state change), anything else as its JSON object; both read back as
the mapping that was sent, through a real PostgreSQL."""

from __future__ import annotations

import psycopg
import pytest

import alkstore
from alkstore.core.tracecontext import read_trace_context, trace_context_json
from alkstore.engines.postgres.identifiers import quote_schema

PARENT = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"

CONTEXTS = [
    {"traceparent": PARENT},
    {"traceparent": "00-ffffffffffffffffffffffffffffffff-0000000000000001-00"},
    {"traceparent": PARENT.upper()},  # not canonical: kept as given
    {"traceparent": "01-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01-extra"},
    {"traceparent": PARENT, "tracestate": "vendor=value"},
    {"b3": "0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-1"},
    {"traceparent": "not a traceparent"},
]


@pytest.mark.parametrize("context", CONTEXTS)
def test_every_context_reads_back_as_sent(context: dict[str, str]) -> None:
    assert read_trace_context(trace_context_json(context)) == context


def test_a_lone_traceparent_is_stored_compactly() -> None:
    assert trace_context_json({"traceparent": PARENT}).startswith('"')
    assert trace_context_json({"traceparent": PARENT, "tracestate": "a=b"}).startswith("{")
    assert read_trace_context(None) is None


def test_the_column_holds_the_compact_form_and_every_form_round_trips(
    pg_dsn: str, schema_name: str
) -> None:
    with alkstore.connect(pg_dsn, schema=schema_name) as store:
        store.create_queue("q")
        ids = store.send_many(
            "q", [{"data": n, "trace_context": c} for n, c in enumerate(CONTEXTS)]
        )
        sent = dict(zip(ids, CONTEXTS, strict=True))
        for job in store.fetch("q", batch_size=len(CONTEXTS)):
            assert job.trace_context == sent[job.id]
        table = f"{quote_schema(schema_name)}.job"
        with psycopg.connect(pg_dsn) as conn:
            size = conn.execute(
                f"SELECT pg_column_size(trace_context) FROM {table} WHERE id = %s",
                (ids[0],),
            ).fetchone()
        # 35 base64 characters in a jsonb string, against 79 bytes for the JSON object.
        assert size is not None and size[0] <= 44
