"""The engine contract: one description per engine, checked structurally, read everywhere.

Every lacking capability is enforced by an emulation guard rule or says why none can exist;
the capabilities the matrix calls used are exactly those the source reads; server-version
predicates are evaluated when the engine is built.
"""

from __future__ import annotations

import inspect
import re
import uuid
from pathlib import Path

import pytest

import alkstore
from alkstore.core.capabilities import Capabilities
from alkstore.core.contracts import Engine, missing_members
from alkstore.core.contracts import TestHooks as Hooks
from alkstore.core.description import EngineDescription, Gap, ServerInfo
from alkstore.core.errors import InvalidOptions
from alkstore.core.states import TRANSITIONS, JobState, Operation
from alkstore.core.targets import targets
from alkstore.engines import BUILTIN, engine_class
from alkstore.engines.capability_matrix import CONSULTED
from alkstore.engines.citus import CitusDistributedEngine, CitusEngine
from alkstore.engines.delegate import DelegatingEngine
from alkstore.engines.emulation import rules_for
from alkstore.engines.postgres import POSTGRES, PostgresEngine
from alkstore.engines.postgres.claim import claim_for
from alkstore.engines.postgres.schema import in_list
from alkstore.engines.postgres.sql import targeted_state

SRC = Path(alkstore.__file__).resolve().parent
NOT_PRODUCT = ("core", "conformance", "bench")
READS = re.compile(r"\b(?:caps|capabilities)\.(\w+)\b|_require\(\s*\"(\w+)\"")
PG16 = ServerInfo("PostgreSQL 16.2 on x86_64-pc-linux-gnu", 160002)
PG17 = ServerInfo("PostgreSQL 17.1 on x86_64-pc-linux-gnu", 170001)


def _derived(names: set[str]) -> dict[str, set[str]]:
    """Each property of Capabilities (``notifies_results``) -> the flags it reads."""
    derived: dict[str, set[str]] = {}
    for attribute, value in vars(Capabilities).items():
        if isinstance(value, property) and value.fget is not None:
            reads = re.findall(r"self\.(\w+)", inspect.getsource(value.fget))
            derived[attribute] = set(reads) & names
    return derived


def _consulted_in_source() -> set[str]:
    names = set(alkstore.core.capabilities.Capabilities().names())
    derived = _derived(names)
    found: set[str] = set()
    for path in SRC.rglob("*.py"):
        relative = path.relative_to(SRC)
        if relative.parts[0] in NOT_PRODUCT or relative.name == "capability_matrix.py":
            continue
        for match in READS.finditer(path.read_text()):
            name = match.group(1) or match.group(2)
            if name in names:
                found.add(name)
            found |= derived.get(name, set())
    return found


def test_the_matrix_calls_used_exactly_the_capabilities_the_code_reads():
    assert _consulted_in_source() == set(CONSULTED)


@pytest.mark.parametrize("name", list(BUILTIN))
def test_every_gap_has_a_guard_rule_or_a_reason_none_can_exist(name):
    description = engine_class(name).description
    profile = description.emulation_profile
    rules = {rule.id: rule for rule in rules_for(profile)} if profile else {}
    for capability, gap in description.gaps.items():
        assert gap.guard_rules or gap.no_rule_reason, f"{name} lacks {capability}: no rule"
        for rule_id in gap.guard_rules:
            assert rule_id in rules, f"{name}: {capability} names unknown guard rule {rule_id}"
            assert rules[rule_id].capability == capability
    # and the other way: a rule that enforces a capability's absence belongs to its gap
    for rule in rules.values():
        if rule.capability is not None:
            assert rule.id in description.gaps[rule.capability].guard_rules, rule.id


@pytest.mark.parametrize("name", list(BUILTIN))
def test_every_builtin_engine_satisfies_the_contract(name):
    cls = engine_class(name)
    assert missing_members(cls) == []
    assert cls.description.name == name
    engine = cls.configure("s", {})
    assert isinstance(engine, Engine)
    assert isinstance(engine.test_hooks(), Hooks)
    assert engine.capabilities == cls.description.capabilities


def test_a_class_missing_members_is_named():
    class Half:
        description = POSTGRES

        def fetch(self) -> None:
            """Only one operation."""

    missing = missing_members(Half)
    assert "migrate" in missing and "test_hooks" in missing and "fetch" not in missing
    assert "description" in missing_members(object)


def test_a_delegating_engine_is_no_postgres_engine_and_satisfies_the_contract():
    described = POSTGRES.derive(
        name="mine", summary="test", gaps={"skip_locked": Gap(why="x", no_rule_reason="y")}
    )

    class Mine(DelegatingEngine):
        description = described

    assert not issubclass(Mine, PostgresEngine)
    assert missing_members(Mine) == []
    engine = Mine.configure("s", {})
    assert engine.name == "mine" and engine.capabilities.skip_locked is False
    sql = next(engine.fetch("q", 1).steps()).sql
    assert "SKIP LOCKED" not in sql
    with pytest.raises(InvalidOptions) as err:
        Mine.configure("s", {"shards": 2})
    assert err.value.field == "engine_options.shards"


def _gained_in_17() -> EngineDescription:
    return POSTGRES.derive(
        name="gaining",
        summary="test",
        gaps={
            "listen_notify": Gap(
                why="before 17", no_rule_reason="test", applies=lambda s: s.version_num < 170000
            ),
            "plpgsql": Gap(why="always", no_rule_reason="test"),
        },
    )


def test_a_gap_the_server_no_longer_has_is_closed_at_connect():
    described = _gained_in_17()
    assert described.capabilities_on(PG16).listen_notify is False
    on_17 = described.capabilities_on(PG17)
    assert (on_17.listen_notify, on_17.plpgsql) == (True, False)
    assert described.capabilities_on(None).listen_notify is False
    engine = PostgresEngine("s", server=PG17, description=described)
    assert engine.capabilities.listen_notify is True
    emulated = PostgresEngine("s", server=PG17, emulated=True, description=described)
    assert emulated.capabilities.listen_notify is False


def test_descriptions_refuse_unknown_capabilities():
    with pytest.raises(ValueError, match="unknown capabilities"):
        POSTGRES.derive(gaps={"time_travel": Gap(why="no")})
    with pytest.raises(ValueError, match="behaviours"):
        POSTGRES.derive(behaviours={"skip_locked": "no"})


def test_citus_options_choose_the_sharded_engine():
    assert type(CitusEngine.configure("s", {})) is CitusEngine
    assert type(CitusEngine.configure("s", {"distributed": True})) is CitusDistributedEngine
    assert type(CitusDistributedEngine.configure("s", {})) is CitusDistributedEngine
    with pytest.raises(InvalidOptions) as err:
        CitusEngine.configure("s", {"distributed": "yes"})
    assert err.value.field == "engine_options.distributed"


def test_detection_reads_descriptions():
    from alkstore.engines.detect import engine_for

    citus = ServerInfo("PostgreSQL 17.4 on x86_64", 170004, frozenset({"citus"}))
    assert engine_for(citus) == "citus"
    assert engine_for(PG17) == "postgres"
    assert engine_for(ServerInfo("CockroachDB CCL v25.2.1", 130000)) == "cockroachdb"


@pytest.mark.parametrize(
    ("flags", "strategy"),
    [
        ({}, "skip-locked-by-tuple-id"),
        ({"tuple_ids": False}, "skip-locked-by-key"),
        ({"skip_locked": False}, "update-with-recheck"),
        ({"skip_locked": False, "tuple_ids": False}, "update-with-recheck"),
    ],
)
def test_the_claim_strategy_is_chosen_from_the_capabilities(flags, strategy):
    caps = Capabilities(**flags)
    chosen = claim_for(caps)
    assert chosen.name == strategy
    sql = chosen.fetch_sql('"s"', chosen.batch_limit)
    assert ("SKIP LOCKED" in sql) == caps.skip_locked
    assert ("ctid" in sql) == (strategy == "skip-locked-by-tuple-id")


@pytest.mark.parametrize(
    "operation", [Operation.CANCEL, Operation.RESUME, Operation.RETRY, Operation.TOUCH]
)
def test_settle_operations_accept_the_states_of_the_transition_table(operation):
    engine = PostgresEngine("s")
    plan = getattr(engine, operation.value)("q", targets([uuid.uuid4()]))
    sql = next(plan.steps()).sql
    states = TRANSITIONS[operation][0]
    # Written to imply no partial index's predicate, so the targets are looked up by
    # primary key (targeted_state).
    assert f"coalesce(j.state, '') IN {in_list(states)}" in sql
    assert targeted_state(operation) in sql
    # The policy guard of resume and retry reads the states of the key's other jobs.
    own = sql.split("WHERE", 1)[1].split("NOT (j.policy IN", 1)[0]
    for state in set(JobState) - states:
        assert f"'{state}'" not in own


def test_the_suite_reaches_the_database_only_through_test_hooks():
    suite = SRC / "conformance"
    # SQL on the store's tables or schema; catalog reads (pg_locks) and "SELECT 1" are no
    # table layout.
    raw = re.compile(
        r"\{s\}\.|\.sql\(|quote_schema|"
        r"\b(?:FROM|UPDATE|INTO|JOIN)\s+(?:\S+\.)?(?:job|queue|version|job_default)\b"
    )
    offenders = [
        f"{path.relative_to(SRC)}:{n}"
        for path in sorted(suite.rglob("*.py"))
        for n, line in enumerate(path.read_text().splitlines(), 1)
        if raw.search(line)
    ]
    assert offenders == []
