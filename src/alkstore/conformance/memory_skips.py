"""What the conformance suite cannot run on the in-memory engine, and why.

Each entry is a test file of the suite, or ``file::test`` for one test, with the reason. The
plugin skips them when ``--alkstore-engine memory`` (docs/engines.md, "The in-memory engine").
"""

from __future__ import annotations

NO_CALLER_TRANSACTIONS = (
    "no transaction the caller owns: the in-memory engine has no connection to join "
    "(store.using(conn), a connection as the DSN, transactional workers)"
)

SKIPS: dict[str, str] = {
    "test_counters.py": "the in-memory engine keeps no per-queue counters (docs/dashboard.md)",
    "test_caller_transactions.py": NO_CALLER_TRANSACTIONS,
    "test_worker.py::test_transactional_worker_commits_writes_with_completion": (
        NO_CALLER_TRANSACTIONS
    ),
    "test_worker.py::test_transactional_with_heartbeat_needs_the_capability": (
        NO_CALLER_TRANSACTIONS
    ),
    "test_worker.py::test_a_serialization_failure_runs_a_transactional_call_again": (
        NO_CALLER_TRANSACTIONS
    ),
    "test_worker.py::test_a_transactional_call_that_never_serializes_fails_its_job": (
        NO_CALLER_TRANSACTIONS
    ),
    "test_worker.py::test_transactional_refuses_a_job_level_heartbeat_without_the_capability": (
        NO_CALLER_TRANSACTIONS
    ),
    "test_worker.py::test_a_transactional_job_completes_though_its_heartbeats_land_meanwhile": (
        NO_CALLER_TRANSACTIONS
    ),
    "test_snooze.py::test_a_transactional_snooze_rolls_the_handlers_writes_back": (
        NO_CALLER_TRANSACTIONS
    ),
}
"""Test file (or ``file::test``) -> why it cannot run on the in-memory engine."""


def skip_reason_on_memory(nodeid: str) -> str | None:
    """Why the test ``nodeid`` cannot run on the in-memory engine, or None."""
    path, _, rest = nodeid.partition("::")
    name = path.rsplit("/", 1)[-1]
    test = rest.partition("[")[0]
    return SKIPS.get(f"{name}::{test}") or SKIPS.get(name)
