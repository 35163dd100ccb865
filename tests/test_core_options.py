"""Queue and job options (spec §5): defaults, validation at the edge, resolution, JSON payloads.

Every invalid value must raise ``InvalidOptions`` (a ``ValueError``) whose ``field`` and
``value`` name the offending option, before anything could reach a database.
"""

from __future__ import annotations

import datetime as dt
import uuid
from typing import Any

import attrs
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from alkstore.core.errors import AlkstoreError, InvalidOptions
from alkstore.core.options import (
    AVAILABLE_POLICIES,
    JobOptions,
    NewJob,
    Policy,
    QueueOptions,
    ResolvedJobOptions,
    dump_json,
)
from alkstore.core.records import as_json
from alkstore.core.validation import MAX_DELAY

DAY_SECONDS = 86_400

SPEC_QUEUE_DEFAULTS: dict[str, Any] = {
    "retry_limit": 2,
    "retry_delay": 0,
    "retry_backoff": False,
    "retry_delay_max": None,
    "expire_seconds": 900,
    "heartbeat_seconds": None,
    "retention_seconds": 14 * DAY_SECONDS,
    "deletion_seconds": 7 * DAY_SECONDS,
    "policy": Policy.STANDARD,
    "dead_letter": None,
    "partition": False,
    "concurrency_limit": None,
}
"""Spec §5, queue-level column: option -> default (``concurrency_limit``: issue 12)."""

SHARED_OPTIONS = {
    "retry_limit",
    "retry_delay",
    "retry_backoff",
    "retry_delay_max",
    "expire_seconds",
    "heartbeat_seconds",
    "retention_seconds",
    "deletion_seconds",
}
"""Spec §5 options marked (job): set on the queue, overridable per job."""

JOB_ONLY_OPTIONS = {
    "id",
    "priority",
    "start_after",
    "singleton_key",
    "singleton_seconds",
    "singleton_next_slot",
    "group_id",
    "group_tier",
    "dead_letter",  # issue 12: a job may name its own dead-letter queue
    "trace_context",  # issue 16: the sender's trace context, carried in the job
}
QUEUE_ONLY_OPTIONS = {"policy", "dead_letter", "partition", "concurrency_limit"}

INT_MINIMUMS = {
    "retry_limit": 0,
    "retry_delay": 0,
    "expire_seconds": 1,
    "heartbeat_seconds": 10,
    "retention_seconds": 1,
    "deletion_seconds": 0,
}
"""Spec §5 rules: integer options and their smallest allowed value."""

SETTINGS = settings(max_examples=150, deadline=None)


def field_names(cls: type) -> set[str]:
    return {a.name for a in attrs.fields(cls)}


def kw(name: str, value: object) -> dict[str, Any]:
    """One keyword argument (typed loosely: these tests pass wrong types on purpose)."""
    return {name: value}


def assert_names(err: InvalidOptions, field: str, value: object) -> None:
    """The error is a ValueError naming ``field`` and carrying the very ``value`` given."""
    assert isinstance(err, ValueError)
    assert isinstance(err, AlkstoreError)
    assert err.field == field
    assert err.value is value or (type(err.value) is type(value) and err.value == value)
    assert str(err).startswith(f"{field}=")
    assert err.reason


# --------------------------------------------------------------------------- defaults


def test_queue_option_names_match_the_spec_table() -> None:
    assert field_names(QueueOptions) == set(SPEC_QUEUE_DEFAULTS)
    assert field_names(QueueOptions) == SHARED_OPTIONS | QUEUE_ONLY_OPTIONS


def test_job_option_names_match_the_spec_table() -> None:
    assert field_names(JobOptions) == SHARED_OPTIONS | JOB_ONLY_OPTIONS


def test_queue_defaults_match_the_spec_table() -> None:
    opts = QueueOptions()
    for name, expected in SPEC_QUEUE_DEFAULTS.items():
        actual = getattr(opts, name)
        assert actual == expected, name
        assert type(actual) is type(expected), name
    assert QueueOptions.from_kwargs({}) == opts


def test_job_options_default_to_inherit() -> None:
    opts = JobOptions()
    assert all(getattr(opts, name) is None for name in field_names(JobOptions))
    assert JobOptions.from_kwargs({}) == opts


def test_empty_job_options_resolve_to_the_spec_defaults() -> None:
    resolved = JobOptions().resolve(QueueOptions())
    expected = {name: SPEC_QUEUE_DEFAULTS[name] for name in SHARED_OPTIONS} | {"priority": 0}
    assert attrs.asdict(resolved) == expected
    assert type(resolved.priority) is int


def test_every_policy_is_available() -> None:
    assert set(Policy) == AVAILABLE_POLICIES
    assert {p.value for p in Policy} == {
        "standard",
        "short",
        "singleton",
        "stately",
        "exclusive",
        "key_strict_fifo",
    }


# --------------------------------------------------------------------------- invalid values


def _bad_ints(minimum: int) -> list[Any]:
    return [
        minimum - 1,
        -1,
        -(10**12),
        True,
        False,
        float(minimum + 1),
        2.5,
        str(minimum + 1),
        b"1",
        [minimum + 1],
    ]


QUEUE_BAD: list[Any] = []
JOB_BAD: list[Any] = []
for _name, _minimum in INT_MINIMUMS.items():
    for _value in _bad_ints(_minimum):
        QUEUE_BAD.append(pytest.param(_name, _value, id=f"{_name}={_value!r}"))
        JOB_BAD.append(pytest.param(_name, _value, id=f"{_name}={_value!r}"))
    if _name != "heartbeat_seconds":
        # A queue must have a value; None is only the job's "inherit".
        QUEUE_BAD.append(pytest.param(_name, None, id=f"{_name}=None"))
for _value in [-1, 1.0, 2.5, True, False, "60", [60]]:
    QUEUE_BAD.append(pytest.param("retry_delay_max", _value, id=f"retry_delay_max={_value!r}"))
    JOB_BAD.append(pytest.param("retry_delay_max", _value, id=f"retry_delay_max={_value!r}"))
for _name in ("retry_backoff", "partition"):
    for _value in [1, 0, "true", "false", "t", [True]]:
        QUEUE_BAD.append(pytest.param(_name, _value, id=f"{_name}={_value!r}"))
for _value in [1, 0, "true", "t"]:
    JOB_BAD.append(pytest.param("retry_backoff", _value, id=f"retry_backoff={_value!r}"))
for _value in ["", "-dlq", "_dlq", ".dlq", "a" * 101, "a b", "dlq\n", "dlq;drop", "é", 5, b"dlq"]:
    QUEUE_BAD.append(pytest.param("dead_letter", _value, id=f"dead_letter={_value!r}"))
for _value in [True, False, 1.0, 2.5, "1", [1]]:
    JOB_BAD.append(pytest.param("priority", _value, id=f"priority={_value!r}"))
for _name in ("singleton_key", "group_id", "group_tier"):
    for _value in ["", "k" * 201, 5, b"k", ["k"]]:
        JOB_BAD.append(pytest.param(_name, _value, id=f"{_name}={_value!r:.20}"))


def _with_backoff(name: str, value: object) -> dict[str, Any]:
    # A bad retry_delay_max must be refused for its value, not for a missing backoff.
    kwargs: dict[str, Any] = {name: value}
    if name == "retry_delay_max":
        kwargs["retry_backoff"] = True
    return kwargs


@pytest.mark.parametrize(("name", "value"), QUEUE_BAD)
def test_queue_options_refuse_bad_values(name: str, value: object) -> None:
    with pytest.raises(InvalidOptions) as info:
        QueueOptions(**_with_backoff(name, value))
    assert_names(info.value, name, value)
    with pytest.raises(InvalidOptions) as info:
        QueueOptions.from_kwargs(_with_backoff(name, value))
    assert_names(info.value, name, value)


@pytest.mark.parametrize(("name", "value"), JOB_BAD)
def test_job_options_refuse_bad_values(name: str, value: object) -> None:
    with pytest.raises(InvalidOptions) as info:
        JobOptions(**_with_backoff(name, value))
    assert_names(info.value, name, value)
    with pytest.raises(InvalidOptions) as info:
        JobOptions.from_kwargs(_with_backoff(name, value))
    assert_names(info.value, name, value)


@pytest.mark.parametrize("name", ["retry_backoff", "partition"])
def test_queue_bool_options_refuse_none(name: str) -> None:
    """A queue's bool options have a value (spec §5 default false); None is not a bool."""
    with pytest.raises(InvalidOptions) as info:
        QueueOptions(**kw(name, None))
    assert_names(info.value, name, None)


@pytest.mark.parametrize(
    ("name", "minimum"), sorted(INT_MINIMUMS.items()), ids=sorted(INT_MINIMUMS)
)
def test_int_options_accept_their_minimum(name: str, minimum: int) -> None:
    assert getattr(QueueOptions(**kw(name, minimum)), name) == minimum
    assert getattr(JobOptions(**kw(name, minimum)), name) == minimum
    # Delays are bounded tighter (365 days: no computed time overflows), counts by int4.
    big = MAX_DELAY if name == "retry_delay" else minimum + 10**9
    assert getattr(JobOptions(**kw(name, big)), name) == big


def test_heartbeat_below_ten_seconds_is_refused() -> None:
    for seconds in range(10):
        with pytest.raises(InvalidOptions) as info:
            QueueOptions(heartbeat_seconds=seconds)
        assert_names(info.value, "heartbeat_seconds", seconds)
        with pytest.raises(InvalidOptions) as info:
            JobOptions(heartbeat_seconds=seconds)
        assert_names(info.value, "heartbeat_seconds", seconds)
    assert QueueOptions(heartbeat_seconds=10).heartbeat_seconds == 10


def test_expire_seconds_zero_is_refused() -> None:
    with pytest.raises(InvalidOptions) as info:
        QueueOptions(expire_seconds=0)
    assert_names(info.value, "expire_seconds", 0)
    with pytest.raises(InvalidOptions) as info:
        JobOptions(expire_seconds=0)
    assert_names(info.value, "expire_seconds", 0)


def test_deletion_seconds_zero_means_keep_forever_and_is_allowed() -> None:
    assert QueueOptions(deletion_seconds=0).deletion_seconds == 0
    assert JobOptions(deletion_seconds=0).deletion_seconds == 0


@pytest.mark.parametrize("delay_max", [0, 60])
def test_retry_delay_max_needs_backoff(delay_max: int) -> None:
    with pytest.raises(InvalidOptions) as info:
        QueueOptions(retry_delay_max=delay_max)
    assert_names(info.value, "retry_delay_max", delay_max)
    with pytest.raises(InvalidOptions) as info:
        QueueOptions(retry_backoff=False, retry_delay_max=delay_max)
    assert_names(info.value, "retry_delay_max", delay_max)
    with pytest.raises(InvalidOptions) as info:
        JobOptions(retry_backoff=False, retry_delay_max=delay_max)
    assert_names(info.value, "retry_delay_max", delay_max)
    # With backoff it is fine; a job that inherits backoff from its queue may set it too.
    assert QueueOptions(retry_backoff=True, retry_delay_max=delay_max).retry_delay_max == delay_max
    assert JobOptions(retry_backoff=True, retry_delay_max=delay_max).retry_delay_max == delay_max
    assert JobOptions(retry_delay_max=delay_max).retry_delay_max == delay_max


@pytest.mark.parametrize("value", [0, -1, True, "5", 2**31])
def test_bad_singleton_seconds_are_refused(value: object) -> None:
    with pytest.raises(InvalidOptions) as info:
        JobOptions(singleton_seconds=value)
    assert_names(info.value, "singleton_seconds", value)


@pytest.mark.parametrize("value", [1, "yes"])
def test_bad_singleton_next_slot_is_refused(value: object) -> None:
    with pytest.raises(InvalidOptions) as info:
        JobOptions(singleton_seconds=5, singleton_next_slot=value)
    assert_names(info.value, "singleton_next_slot", value)


def test_singleton_next_slot_needs_singleton_seconds() -> None:
    with pytest.raises(InvalidOptions) as info:
        JobOptions(singleton_next_slot=True)
    assert_names(info.value, "singleton_next_slot", True)
    opts = JobOptions(singleton_seconds=60, singleton_next_slot=True, singleton_key="k")
    assert (opts.singleton_seconds, opts.singleton_next_slot) == (60, True)


@pytest.mark.parametrize("value", [0, True, 1.5])
def test_bad_concurrency_limit_is_refused(value: object) -> None:
    with pytest.raises(InvalidOptions) as info:
        QueueOptions(concurrency_limit=value)
    assert_names(info.value, "concurrency_limit", value)


def test_text_options_accept_up_to_200_chars() -> None:
    opts = JobOptions(singleton_key="k" * 200, group_id="g", group_tier="t" * 200)
    assert (opts.singleton_key, opts.group_id, opts.group_tier) == ("k" * 200, "g", "t" * 200)


@pytest.mark.parametrize("priority", [-(10**6), -1, 0, 1, 10**6])
def test_priority_accepts_any_int(priority: int) -> None:
    assert JobOptions(priority=priority).priority == priority


@pytest.mark.parametrize("name", ["dlq", "0", "a" * 100, "a.b/c-d_e", "Dead_Letters"])
def test_dead_letter_accepts_valid_queue_names(name: str) -> None:
    assert QueueOptions(dead_letter=name).dead_letter == name


# --------------------------------------------------------------------------- start_after

AWARE = dt.datetime(2030, 5, 6, 7, 8, 9, 123456, tzinfo=dt.UTC)


@pytest.mark.parametrize(
    "when",
    [
        AWARE,
        AWARE.astimezone(dt.timezone(dt.timedelta(hours=5, minutes=30))),
        dt.datetime.now(dt.UTC),
    ],
    ids=["utc", "plus-0530", "now"],
)
def test_start_after_keeps_aware_datetimes(when: dt.datetime) -> None:
    got = JobOptions(start_after=when).start_after
    assert isinstance(got, dt.datetime)
    assert got == when
    assert got.utcoffset() == when.utcoffset()


@pytest.mark.parametrize(
    ("given", "seconds"),
    [
        (0, 0.0),
        (30, 30.0),
        (2.5, 2.5),
        (dt.timedelta(0), 0.0),
        (dt.timedelta(minutes=2), 120.0),
        (dt.timedelta(days=1, microseconds=500_000), 86_400.5),
    ],
)
def test_start_after_normalises_delays_to_float_seconds(given: object, seconds: float) -> None:
    got = JobOptions(start_after=given).start_after
    assert type(got) is float
    assert got == seconds


@pytest.mark.parametrize(
    "value",
    [
        dt.datetime(2030, 1, 1),  # naive
        dt.datetime.now(),  # naive
        -1,
        -0.001,
        float("-inf"),
        True,
        False,
        "10",
        b"10",
        [10],
        dt.date(2030, 1, 1),
    ],
    ids=repr,
)
def test_start_after_refuses_bad_values(value: object) -> None:
    with pytest.raises(InvalidOptions) as info:
        JobOptions(start_after=value)
    assert_names(info.value, "start_after", value)


@pytest.mark.parametrize("value", [float("nan"), float("inf")], ids=repr)
def test_start_after_refuses_non_finite_seconds(value: float) -> None:
    """NaN or infinite seconds are not a delay (spec §5: seconds; refused before any write)."""
    with pytest.raises(InvalidOptions) as info:
        JobOptions(start_after=value)
    assert_names(info.value, "start_after", value)


def test_start_after_error_names_the_negative_timedelta_given() -> None:
    """The error carries the value the caller passed, not a converted one."""
    value = dt.timedelta(seconds=-5)
    with pytest.raises(InvalidOptions) as info:
        JobOptions(start_after=value)
    assert_names(info.value, "start_after", value)


# --------------------------------------------------------------------------- policies


@pytest.mark.parametrize("value", ["bogus", "", "Standard", "STANDARD", 0, None, []], ids=repr)
def test_unknown_policy_names_are_refused(value: object) -> None:
    with pytest.raises(InvalidOptions) as info:
        QueueOptions(policy=value)
    assert_names(info.value, "policy", value)


@pytest.mark.parametrize("policy", list(Policy))
def test_every_policy_is_accepted_by_name(policy: Policy) -> None:
    for value in (policy, policy.value):
        assert QueueOptions(policy=value).policy is policy


@pytest.mark.parametrize("value", [Policy.STANDARD, "standard"])
def test_standard_policy_is_accepted_and_converted(value: object) -> None:
    policy = QueueOptions(policy=value).policy
    assert policy is Policy.STANDARD


# --------------------------------------------------------------------------- ids

SOME_ID = uuid.UUID("0190b4c2-7e1f-7a3b-8c4d-5e6f7a8b9c0d")


@pytest.mark.parametrize(
    "value",
    [
        SOME_ID,
        str(SOME_ID),
        str(SOME_ID).upper(),
        "{" + str(SOME_ID) + "}",
        SOME_ID.hex,
        SOME_ID.urn,
    ],
    ids=repr,
)
def test_job_id_accepts_uuids_and_their_strings(value: object) -> None:
    got = JobOptions(id=value).id
    assert type(got) is uuid.UUID
    assert got == SOME_ID


@pytest.mark.parametrize(
    "value",
    [
        "",
        "nope",
        "1234",
        str(SOME_ID) + "0",
        str(SOME_ID)[:-1],
        str(SOME_ID).replace("a", "g"),
        123,
        True,
        1.5,
        SOME_ID.bytes,
        [str(SOME_ID)],
    ],
    ids=repr,
)
def test_job_id_refuses_non_uuids(value: object) -> None:
    with pytest.raises(InvalidOptions) as info:
        JobOptions(id=value)
    assert_names(info.value, "id", value)


def test_job_id_refuses_an_integer_even_with_32_digits() -> None:
    """An int is not a UUID; it must not be reinterpreted through its decimal digits as hex."""
    value = int("1" * 32)
    with pytest.raises(InvalidOptions) as info:
        JobOptions(id=value)
    assert_names(info.value, "id", value)


# --------------------------------------------------------------------------- unknown names


@pytest.mark.parametrize(
    "name", ["retry_limt", "colour", "priority", "start_after", "id", "singleton_key", "data"]
)
def test_queue_from_kwargs_refuses_unknown_names(name: str) -> None:
    with pytest.raises(InvalidOptions) as info:
        QueueOptions.from_kwargs({"retry_limit": 3, name: 7})
    assert_names(info.value, name, 7)


@pytest.mark.parametrize(
    "name", ["retry_limt", "colour", "policy", "dead_letter", "partition", "queue", "data"]
)
def test_job_from_kwargs_refuses_unknown_names(name: str) -> None:
    with pytest.raises(InvalidOptions) as info:
        JobOptions.from_kwargs({"priority": 3, name: 7})
    assert_names(info.value, name, 7)


def test_from_kwargs_builds_the_same_objects_as_the_constructor() -> None:
    queue_kwargs: dict[str, Any] = {"retry_limit": 5, "retry_backoff": True, "retry_delay_max": 30}
    assert QueueOptions.from_kwargs(queue_kwargs) == QueueOptions(**queue_kwargs)
    job_kwargs: dict[str, Any] = {"priority": -3, "start_after": 5, "group_id": "g"}
    built = JobOptions.from_kwargs(job_kwargs)
    assert built == JobOptions(**job_kwargs)
    assert (built.priority, built.start_after, built.group_id) == (-3, 5.0, "g")


# --------------------------------------------------------------------------- resolution


@st.composite
def queue_options(draw: st.DrawFn) -> QueueOptions:
    backoff = draw(st.booleans())
    return QueueOptions(
        retry_limit=draw(st.integers(0, 100)),
        retry_delay=draw(st.integers(0, 10_000)),
        retry_backoff=backoff,
        retry_delay_max=draw(st.none() | st.integers(0, 10_000)) if backoff else None,
        expire_seconds=draw(st.integers(1, 10**6)),
        heartbeat_seconds=draw(st.none() | st.integers(10, 10**5)),
        retention_seconds=draw(st.integers(1, 10**8)),
        deletion_seconds=draw(st.integers(0, 10**8)),
        dead_letter=draw(st.none() | st.sampled_from(["dlq", "dead.letters"])),
        partition=draw(st.booleans()),
    )


@st.composite
def job_options(draw: st.DrawFn) -> JobOptions:
    def opt(strategy: st.SearchStrategy[Any]) -> Any:
        return draw(st.none() | strategy)

    backoff = opt(st.booleans())
    return JobOptions(
        priority=opt(st.integers(-1000, 1000)),
        retry_limit=opt(st.integers(0, 100)),
        retry_delay=opt(st.integers(0, 10_000)),
        retry_backoff=backoff,
        retry_delay_max=None if backoff is False else opt(st.integers(0, 10_000)),
        expire_seconds=opt(st.integers(1, 10**6)),
        heartbeat_seconds=opt(st.integers(10, 10**5)),
        retention_seconds=opt(st.integers(1, 10**8)),
        deletion_seconds=opt(st.integers(0, 10**8)),
    )


def test_resolved_options_are_the_shared_options_plus_priority() -> None:
    assert field_names(ResolvedJobOptions) == SHARED_OPTIONS | {"priority"}
    # A job's own dead_letter overrides its queue's when it fails, not when it is sent.
    assert field_names(QueueOptions) & field_names(JobOptions) == SHARED_OPTIONS | {"dead_letter"}


@SETTINGS
@given(job=job_options(), queue=queue_options())
def test_resolve_takes_the_job_value_when_set_else_the_queue_value(
    job: JobOptions, queue: QueueOptions
) -> None:
    resolved = job.resolve(queue)
    for name in SHARED_OPTIONS:
        own = getattr(job, name)
        expected = getattr(queue, name) if own is None else own
        actual = getattr(resolved, name)
        assert actual == expected, name
        assert type(actual) is type(expected), name
    assert resolved.priority == (0 if job.priority is None else job.priority)


def test_resolve_keeps_falsy_job_values() -> None:
    """0 and False set on the job win over the queue (no ``or``-style fallback)."""
    queue = QueueOptions(
        retry_limit=5, retry_delay=9, retry_backoff=True, retry_delay_max=99, deletion_seconds=50
    )
    job = JobOptions(
        retry_limit=0, retry_delay=0, retry_backoff=False, deletion_seconds=0, priority=0
    )
    resolved = job.resolve(queue)
    assert resolved.retry_limit == 0
    assert resolved.retry_delay == 0
    assert resolved.retry_backoff is False
    assert resolved.deletion_seconds == 0
    assert resolved.priority == 0


# --------------------------------------------------------------------------- updated


def test_updated_applies_changes_and_keeps_the_rest() -> None:
    original = QueueOptions(retry_limit=1, dead_letter="dlq")
    changed = original.updated({"retry_limit": 7, "heartbeat_seconds": 30})
    assert changed.retry_limit == 7
    assert changed.heartbeat_seconds == 30
    assert changed.dead_letter == "dlq"
    assert changed.expire_seconds == 900
    assert original.retry_limit == 1  # frozen: the original is untouched
    assert original.heartbeat_seconds is None
    assert original.updated({}) == original


@pytest.mark.parametrize("policy", [p for p in Policy if p is not Policy.STANDARD])
def test_updated_refuses_a_policy_change(policy: Policy) -> None:
    for value in (policy, policy.value):
        with pytest.raises(InvalidOptions) as info:
            QueueOptions().updated({"policy": value})
        assert_names(info.value, "policy", value)


def test_updated_accepts_the_unchanged_policy() -> None:
    assert QueueOptions().updated({"policy": "standard"}).policy is Policy.STANDARD
    assert QueueOptions().updated({"policy": Policy.STANDARD}).policy is Policy.STANDARD


@pytest.mark.parametrize("partition", [False, True])
def test_updated_refuses_a_partition_change(partition: bool) -> None:
    opts = QueueOptions(partition=partition)
    with pytest.raises(InvalidOptions) as info:
        opts.updated({"partition": not partition})
    assert_names(info.value, "partition", not partition)
    assert opts.updated({"partition": partition}).partition is partition


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("retry_limit", -1),
        ("retry_limit", True),
        ("retry_delay", 1.5),
        ("expire_seconds", 0),
        ("heartbeat_seconds", 9),
        ("retention_seconds", 0),
        ("deletion_seconds", -1),
        ("dead_letter", "not a name"),
        ("retry_backoff", "yes"),
    ],
)
def test_updated_validates_new_values(name: str, value: object) -> None:
    with pytest.raises(InvalidOptions) as info:
        QueueOptions().updated({name: value})
    assert_names(info.value, name, value)


def test_updated_rechecks_delay_max_against_backoff() -> None:
    opts = QueueOptions(retry_backoff=True, retry_delay_max=60)
    with pytest.raises(InvalidOptions) as info:
        opts.updated({"retry_backoff": False})
    assert_names(info.value, "retry_delay_max", 60)
    assert opts.updated({"retry_backoff": False, "retry_delay_max": None}).retry_backoff is False
    with pytest.raises(InvalidOptions) as info:
        QueueOptions().updated({"retry_delay_max": 5})
    assert_names(info.value, "retry_delay_max", 5)


@pytest.mark.parametrize("name", ["priority", "start_after", "retry_limt"])
def test_updated_refuses_unknown_names(name: str) -> None:
    with pytest.raises(InvalidOptions) as info:
        QueueOptions().updated({name: 1})
    assert_names(info.value, name, 1)


# --------------------------------------------------------------------------- dead letter


def test_check_dead_letter_refuses_the_queue_itself() -> None:
    opts = QueueOptions(dead_letter="jobs")
    with pytest.raises(InvalidOptions) as info:
        opts.check_dead_letter("jobs")
    assert_names(info.value, "dead_letter", "jobs")


def test_check_dead_letter_accepts_another_queue_or_none() -> None:
    QueueOptions(dead_letter="dlq").check_dead_letter("jobs")
    QueueOptions(dead_letter="dlq").check_dead_letter("DLQ")
    QueueOptions().check_dead_letter("jobs")


# --------------------------------------------------------------------------- JSON payloads


class _Thing:
    pass


NON_JSON: list[Any] = [
    {1, 2},
    frozenset({"a"}),
    _Thing(),
    float("nan"),
    float("inf"),
    float("-inf"),
    b"bytes",
    1 + 2j,
    dt.datetime(2030, 1, 1, tzinfo=dt.UTC),
    SOME_ID,
    {"nested": [1, {2, 3}]},
    {"nested": {"deeper": float("nan")}},
    [1, 2, _Thing()],
]


@pytest.mark.parametrize("value", NON_JSON, ids=lambda v: type(v).__name__)
def test_dump_json_refuses_non_json_values(value: object) -> None:
    with pytest.raises(InvalidOptions) as info:
        dump_json("data", value)
    assert_names(info.value, "data", value)
    with pytest.raises(InvalidOptions) as info:
        NewJob.build(value, JobOptions(), uuid.uuid4)
    assert_names(info.value, "data", value)


def test_dump_json_names_the_field_it_is_given() -> None:
    with pytest.raises(InvalidOptions) as info:
        dump_json("output", {1})
    assert info.value.field == "output"


def test_dump_json_refuses_a_circular_structure() -> None:
    loop: list[Any] = []
    loop.append(loop)
    with pytest.raises(InvalidOptions) as info:
        dump_json("data", loop)
    assert info.value.field == "data"
    assert info.value.value is loop


# jsonb cannot store NUL; dump_json refuses it (tested below), so JSON values leave it out.
JSONB_TEXT = st.characters(blacklist_characters="\x00", blacklist_categories=("Cs",))

JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(alphabet=JSONB_TEXT),
    lambda children: (
        st.lists(children, max_size=5)
        | st.dictionaries(st.text(alphabet=JSONB_TEXT, max_size=10), children, max_size=5)
    ),
    max_leaves=25,
)


@SETTINGS
@given(value=JSON)
def test_dump_json_round_trips_json_values(value: Any) -> None:
    text = dump_json("data", value)
    if value is None:
        assert text is None  # a missing payload is stored as NULL
    else:
        assert isinstance(text, str)
    assert as_json(text) == value


def test_dump_json_is_compact() -> None:
    assert dump_json("data", {"a": [1, 2], "b": None}) == '{"a":[1,2],"b":null}'
    assert dump_json("data", "text") == '"text"'
    assert dump_json("data", False) == "false"
    assert dump_json("data", 0) == "0"


@SETTINGS
@given(value=JSON)
def test_new_job_build_serialises_data_and_keeps_options(value: Any) -> None:
    options = JobOptions(priority=3, start_after=10)
    job = NewJob.build(value, options, uuid.uuid4)
    assert job.options is options
    assert job.data_json == dump_json("data", value)
    assert as_json(job.data_json) == value


@pytest.mark.parametrize("value", ["\x00", {"k": "a\x00b"}, {"\x00": 1}, ["\x00"]])
def test_dump_json_refuses_nul_characters(value: object) -> None:
    with pytest.raises(InvalidOptions) as info:
        dump_json("data", value)
    assert info.value.field == "data"


def test_dump_json_keeps_an_escaped_backslash_before_u0000() -> None:
    assert dump_json("data", "\\u0000") == '"\\\\u0000"'
