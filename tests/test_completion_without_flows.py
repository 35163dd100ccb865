"""A completion pays for flows only when it completes a flow parent, on every engine.

The plans are stepped by hand with the rows the server would return: no database. On
sharded Citus the flows' statement writes ``job_blocked`` and releases jobs of other queues,
beyond the queue's one shard (as a reference table, its shard lock on every node serialised
every completion of the cluster; docs/engines.md); the statement a queue without flows runs
must pass the guard's ``spread-from-one-shard`` rule.
"""

from __future__ import annotations

import uuid
from collections.abc import Generator
from typing import Any

import pytest

from alkstore.core.plans import Statement
from alkstore.core.targets import targets
from alkstore.engines.citus import CitusDistributedEngine
from alkstore.engines.cockroachdb import CockroachDBEngine
from alkstore.engines.emulation import CITUS_DISTRIBUTED
from alkstore.engines.postgres import PostgresEngine

ENGINES = [PostgresEngine, CitusDistributedEngine, CockroachDBEngine]
FLOW_TABLES = ("job_blocked", "job_dependency")
RULES = [{"policy": "standard", "paused": False, "concurrency_limit": None, "partition": False}]
"""The queue row an empty claim reads (to tell "no jobs" from "no such queue")."""


def _run(steps: Generator[Statement, Any, Any], answers: list[list[dict[str, Any]]]) -> list[str]:
    """The SQL of each statement ``steps`` yields, answered with ``answers`` in turn."""
    sent = [next(steps).sql]
    for rows in answers:
        try:
            sent.append(steps.send(rows).sql)
        except StopIteration:
            return sent
    raise AssertionError("the plan sent more statements than answered")


def _writes_flow_tables(sql: str) -> bool:
    return any(table in sql for table in FLOW_TABLES)


@pytest.mark.parametrize("engine_class", ENGINES, ids=lambda c: c.__name__)
def test_a_completion_without_flow_parents_is_one_statement_without_flow_tables(engine_class):
    engine = engine_class("s")
    plan = engine.complete("q", targets([uuid.uuid4()]), None)
    sent = _run(plan.steps(), [[{"n": 1, "flow_parents": 0}]])
    assert len(sent) == 1
    assert not _writes_flow_tables(sent[0])
    assert CITUS_DISTRIBUTED.violation(sent[0]) is None


@pytest.mark.parametrize("engine_class", ENGINES, ids=lambda c: c.__name__)
def test_a_completion_of_a_flow_parent_releases_its_flow_jobs(engine_class):
    engine = engine_class("s")
    plan = engine.complete("q", targets([uuid.uuid4()]), None)
    counted_down = [{"n": 1, "name": None, "id": None, "waiting": None}]
    sent = _run(plan.steps(), [[{"n": 0, "flow_parents": 1}], counted_down])
    assert len(sent) == 2
    assert not _writes_flow_tables(sent[0])
    assert "job_blocked" in sent[1]


@pytest.mark.parametrize("engine_class", [PostgresEngine, CitusDistributedEngine])
def test_complete_and_fetch_without_flow_parents_is_one_statement(engine_class):
    engine = engine_class("s")
    engine.plain_queues["q"] = True
    plan = engine.complete_and_fetch("q", targets([uuid.uuid4()]), None, 1, False)
    assert plan is not None
    row = {"completed": 1, "flow_parents": 0, "picked": 0, "id": None}
    sent = _run(plan.steps(), [[row], RULES])
    assert len(sent) == 2  # the second, the empty claim's read of the queue row
    assert not _writes_flow_tables(sent[0])
    assert sent[1].lstrip().startswith("SELECT") and "job" not in sent[1]
    assert CITUS_DISTRIBUTED.violation(sent[0]) is None


def test_complete_and_fetch_of_a_flow_parent_completes_with_the_release_then_claims():
    engine = PostgresEngine("s")
    engine.plain_queues["q"] = True
    plan = engine.complete_and_fetch("q", targets([uuid.uuid4()]), None, 1, False)
    assert plan is not None
    first = {"completed": 0, "flow_parents": 1, "picked": 0, "id": None}
    sent = _run(plan.steps(), [[first], [{"n": 1}], [{"picked": 0, "id": None}], RULES])
    assert len(sent) == 4
    assert "job_blocked" in sent[1]
    assert not _writes_flow_tables(sent[2])
