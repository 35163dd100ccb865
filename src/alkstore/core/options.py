"""Queue and job options: validated at the API edge, resolved job > queue > default.

Validation happens when the option objects are built, so a bad value raises
:class:`~alkstore.core.errors.InvalidOptions` before anything reaches the database.
"""

from __future__ import annotations

import datetime as dt
import enum
import json
import math
import re
import uuid
from collections.abc import Callable, Mapping
from typing import Any

import attrs

from .errors import InvalidOptions
from .validation import (
    INT_MAX,
    boolean,
    bounded_time,
    check_storable_text,
    delay_seconds,
    int_at_least,
    optional_bool,
    optional_int,
    optional_text,
    queue_name,
)

DAY = 86_400


class Policy(enum.StrEnum):
    """Queue policies (spec §6, docs/queues.md): limits per queue and ``singleton_key``."""

    STANDARD = "standard"
    SHORT = "short"
    SINGLETON = "singleton"
    STATELY = "stately"
    EXCLUSIVE = "exclusive"
    KEY_STRICT_FIFO = "key_strict_fifo"


AVAILABLE_POLICIES = frozenset(Policy)

KEYED_CLAIM_POLICIES = frozenset({Policy.SINGLETON, Policy.STATELY, Policy.KEY_STRICT_FIFO})
"""Policies whose claim must look at the other jobs of a key (at most one active each)."""


def _policy(value: object) -> Policy:
    try:
        return Policy(str(value))
    except ValueError:
        raise InvalidOptions(
            "policy", value, f"must be one of {', '.join(p.value for p in Policy)}"
        ) from None


def _check_delay_max(inst: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
    delay_seconds(inst, attribute, value)
    if value is not None and inst.retry_backoff is False:
        raise InvalidOptions(attribute.name, value, "only applies with retry_backoff=True")


@attrs.frozen(kw_only=True)
class QueueOptions:
    """A queue's settings; every job option here is the default for jobs sent to the queue."""

    retry_limit: int = attrs.field(default=2, validator=int_at_least(0))
    retry_delay: int = attrs.field(default=0, validator=[int_at_least(0), delay_seconds])
    retry_backoff: bool = attrs.field(default=False, validator=boolean)
    retry_delay_max: int | None = attrs.field(default=None, validator=_check_delay_max)
    expire_seconds: int = attrs.field(default=900, validator=int_at_least(1))
    heartbeat_seconds: int | None = attrs.field(
        default=None, validator=int_at_least(10, optional=True)
    )
    retention_seconds: int = attrs.field(default=14 * DAY, validator=int_at_least(1))
    deletion_seconds: int = attrs.field(default=7 * DAY, validator=int_at_least(0))
    policy: Policy = attrs.field(default=Policy.STANDARD, converter=_policy)
    dead_letter: str | None = attrs.field(default=None, validator=queue_name)
    partition: bool = attrs.field(default=False, validator=boolean)
    concurrency_limit: int | None = attrs.field(
        default=None, validator=int_at_least(1, optional=True)
    )
    """At most this many active jobs in the queue at once, across every fetcher."""

    @classmethod
    def from_kwargs(cls, kwargs: Mapping[str, Any]) -> QueueOptions:
        """Build from keyword arguments, rejecting unknown names."""
        _reject_unknown(cls, kwargs)
        return cls(**kwargs)

    def updated(self, changes: Mapping[str, Any]) -> QueueOptions:
        """A copy with ``changes`` applied and validated; ``policy`` and ``partition`` are fixed."""
        _reject_unknown(QueueOptions, changes)
        for fixed in ("policy", "partition"):
            if fixed in changes and changes[fixed] != getattr(self, fixed):
                raise InvalidOptions(fixed, changes[fixed], "cannot change after creation")
        return attrs.evolve(self, **changes)

    def check_dead_letter(self, name: str) -> None:
        """Refuse a queue that dead-letters into itself."""
        if self.dead_letter == name:
            raise InvalidOptions("dead_letter", self.dead_letter, "may not be the queue itself")


def _start_after(value: object) -> dt.datetime | float | None:
    """Normalise ``start_after``: an aware datetime, or a delay in seconds from the server's now."""
    if value is None:
        return None
    if isinstance(value, dt.datetime):
        if value.tzinfo is None:
            raise InvalidOptions("start_after", value, "datetime must be timezone-aware")
        return bounded_time("start_after", value)
    seconds = value.total_seconds() if isinstance(value, dt.timedelta) else value
    if (
        isinstance(seconds, bool)
        or not isinstance(seconds, int | float)
        or not math.isfinite(seconds)
        or seconds < 0
    ):
        raise InvalidOptions(
            "start_after", value, "must be an aware datetime, a timedelta or seconds >= 0"
        )
    if seconds > MAX_START_AFTER:
        raise InvalidOptions("start_after", value, f"must be at most {MAX_START_AFTER} seconds")
    return float(seconds)


MAX_START_AFTER = INT_MAX
"""The longest ``start_after`` delay in seconds (68 years): ``now()`` plus it stays a
timestamp PostgreSQL can store."""


def _next_slot(inst: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
    optional_bool(inst, attribute, value)
    if value and inst.singleton_seconds is None:
        raise InvalidOptions(attribute.name, value, "only applies with singleton_seconds")


MAX_TRACE_ENTRIES = 8
"""The most headers a job's ``trace_context`` carries."""
MAX_TRACE_KEY = 64
"""The longest header name in a ``trace_context``."""
MAX_TRACE_VALUE = 1024
"""The longest header value in a ``trace_context`` (W3C ``tracestate`` is at most 512)."""


def check_trace_context(value: object) -> dict[str, str] | None:
    """Validate a ``trace_context``: None, or a small mapping of header name -> value (str)."""
    if value is None:
        return None
    if not isinstance(value, Mapping):
        raise InvalidOptions("trace_context", value, "must be a mapping of str -> str")
    if len(value) > MAX_TRACE_ENTRIES:
        raise InvalidOptions("trace_context", value, f"has over {MAX_TRACE_ENTRIES} entries")
    for key, item in value.items():
        if not isinstance(key, str) or not 0 < len(key) <= MAX_TRACE_KEY:
            raise InvalidOptions(
                "trace_context", key, f"keys must be non-empty str of at most {MAX_TRACE_KEY}"
            )
        if not isinstance(item, str) or len(item) > MAX_TRACE_VALUE:
            raise InvalidOptions(
                f"trace_context[{key!r}]", item, f"must be a str of at most {MAX_TRACE_VALUE}"
            )
        check_storable_text("trace_context", key)
        check_storable_text(f"trace_context[{key!r}]", item)
    if not value:
        return None
    # A dict is kept as given (not copied): the jobs of a batch share the sender's one
    # context, which the send then encodes once.
    return value if type(value) is dict else dict(value)


def _job_id(value: object) -> uuid.UUID | None:
    if value is None or isinstance(value, uuid.UUID):
        return value
    if isinstance(value, str):
        try:
            return uuid.UUID(value)
        except ValueError:
            pass
    raise InvalidOptions("id", value, "must be a UUID or a UUID string")


@attrs.frozen(kw_only=True)
class JobOptions:
    """Per-job options. ``None`` means: take the queue's value."""

    id: uuid.UUID | None = attrs.field(default=None, converter=_job_id)
    priority: int | None = attrs.field(default=None, validator=optional_int)
    start_after: dt.datetime | float | None = attrs.field(default=None, converter=_start_after)
    retry_limit: int | None = attrs.field(default=None, validator=int_at_least(0, optional=True))
    retry_delay: int | None = attrs.field(
        default=None, validator=[int_at_least(0, optional=True), delay_seconds]
    )
    retry_backoff: bool | None = attrs.field(default=None, validator=optional_bool)
    retry_delay_max: int | None = attrs.field(default=None, validator=_check_delay_max)
    expire_seconds: int | None = attrs.field(default=None, validator=int_at_least(1, optional=True))
    heartbeat_seconds: int | None = attrs.field(
        default=None, validator=int_at_least(10, optional=True)
    )
    retention_seconds: int | None = attrs.field(
        default=None, validator=int_at_least(1, optional=True)
    )
    deletion_seconds: int | None = attrs.field(
        default=None, validator=int_at_least(0, optional=True)
    )
    singleton_key: str | None = attrs.field(default=None, validator=optional_text(200))
    singleton_seconds: int | None = attrs.field(
        default=None, validator=int_at_least(1, optional=True)
    )
    """Throttle: one job per ``singleton_key`` per slot of this many seconds."""
    singleton_next_slot: bool | None = attrs.field(default=None, validator=_next_slot)
    """Debounce: a job the throttle refuses goes to the next slot instead."""
    group_id: str | None = attrs.field(default=None, validator=optional_text(200))
    group_tier: str | None = attrs.field(default=None, validator=optional_text(200))
    dead_letter: str | None = attrs.field(default=None, validator=queue_name)
    """This job's dead-letter queue, instead of its queue's (it must exist when sent)."""
    trace_context: dict[str, str] | None = attrs.field(
        default=None, converter=check_trace_context, eq=False
    )
    """The sender's trace context as propagation headers (W3C ``traceparent``/``tracestate``),
    stored with the job so its processing links to the send (docs/observability.md).
    :func:`alkstore.telemetry.instrument` fills it in; an empty mapping stores nothing."""

    @classmethod
    def from_kwargs(cls, kwargs: Mapping[str, Any]) -> JobOptions:
        """Build from keyword arguments, rejecting unknown names."""
        _reject_unknown(cls, kwargs)
        return cls(**kwargs)

    def resolve(self, queue: QueueOptions) -> ResolvedJobOptions:
        """Resolve job > queue > default (the engines do the same in SQL, atomically)."""

        def pick(name: str) -> Any:
            own = getattr(self, name)
            return getattr(queue, name) if own is None else own

        return ResolvedJobOptions(
            priority=self.priority or 0,
            retry_limit=pick("retry_limit"),
            retry_delay=pick("retry_delay"),
            retry_backoff=pick("retry_backoff"),
            retry_delay_max=pick("retry_delay_max"),
            expire_seconds=pick("expire_seconds"),
            heartbeat_seconds=pick("heartbeat_seconds"),
            retention_seconds=pick("retention_seconds"),
            deletion_seconds=pick("deletion_seconds"),
        )


@attrs.frozen(kw_only=True)
class ResolvedJobOptions:
    """The effective settings of one job after resolution."""

    priority: int
    retry_limit: int
    retry_delay: int
    retry_backoff: bool
    retry_delay_max: int | None
    expire_seconds: int
    heartbeat_seconds: int | None
    retention_seconds: int
    deletion_seconds: int


@attrs.frozen
class NewJob:
    """A job about to be sent: its id, its payload (as JSON text) and its options."""

    data_json: str | None
    options: JobOptions
    id: uuid.UUID = attrs.field(kw_only=True)

    @classmethod
    def build(cls, data: Any, options: JobOptions, new_id: Callable[[], uuid.UUID]) -> NewJob:
        """Serialise ``data`` to JSON now, so a bad payload fails before anything is written;
        the id is the caller-chosen ``options.id``, else ``new_id()``."""
        return cls(dump_json("data", data), options, id=options.id or new_id())


_NUL_ESCAPE = re.compile(r"(?<!\\)(?:\\\\)*\\u0000")
"""A JSON escape of a NUL character (not an escaped backslash followed by "u0000")."""


_ENCODER = json.JSONEncoder(separators=(",", ":"), allow_nan=False)
"""Shared: ``json.dumps`` with arguments builds a new encoder on every call."""


def _one_shot_encoder() -> Callable[[Any], str]:
    """:data:`_ENCODER`'s ``encode``, or, where CPython's C scanner is there, the C encoder that
    ``encode`` builds on every call, built once: 0.45 µs instead of 1.4 µs for a small
    payload, paid per job by ``send_many``. Without circular-reference markers (a shared
    markers dict would be shared between threads too): a cycle ends in RecursionError,
    which :func:`dump_json` reports as too deeply nested, as it is."""
    make = getattr(json.encoder, "c_make_encoder", None)
    if make is None:
        return _ENCODER.encode
    chunks = make(
        None,
        _ENCODER.default,
        json.encoder.encode_basestring_ascii,
        None,
        ":",
        ",",
        False,  # sort_keys
        False,  # skipkeys
        False,  # allow_nan
    )

    def encode(value: Any) -> str:
        return "".join(chunks(value, 0))

    return encode


_encode = _one_shot_encoder()


def dump_json(field: str, value: Any) -> str | None:
    """JSON text of ``value`` (``None`` stays ``None``), or :class:`InvalidOptions`."""
    if value is None:
        return None
    if isinstance(value, str) and len(value) > MAX_JSON_CHARS:  # before encoding it all
        raise InvalidOptions(field, value, f"is over {MAX_JSON_CHARS} characters")
    try:
        text = _encode(value)
    except (TypeError, ValueError) as exc:
        raise InvalidOptions(field, value, f"is not JSON-serialisable: {exc}") from None
    except RecursionError:
        raise InvalidOptions(field, value, "is nested too deeply to serialise") from None
    if "\\u0000" in text and _NUL_ESCAPE.search(text):
        raise InvalidOptions(field, value, "contains a NUL character, which jsonb cannot store")
    if ("\\ud" in text or "\\uD" in text) and _LONE_SURROGATE.search(text):
        raise InvalidOptions(field, value, "contains a lone surrogate, which jsonb cannot store")
    if len(text) > MAX_JSON_CHARS:
        raise InvalidOptions(
            field, value, f"is {len(text)} characters of JSON; at most {MAX_JSON_CHARS} are stored"
        )
    return text


_LONE_SURROGATE = re.compile(
    r"(?<!\\)(?:\\\\)*(?:\\u[dD][89abAB][0-9a-fA-F]{2}(?!\\u[dD][c-fC-F])"
    r"|(?<![89abAB][0-9a-fA-F]{2})\\u[dD][c-fC-F][0-9a-fA-F]{2})"
)
"""A JSON escape of a high surrogate not followed by a low one, or of a low one not preceded
by a high one: text PostgreSQL's jsonb refuses."""

MAX_JSON_CHARS = 255 * 2**20
"""The longest JSON text stored (jsonb holds less than 256 MB)."""


def _reject_unknown(cls: type, kwargs: Mapping[str, Any]) -> None:
    known = {a.name for a in attrs.fields(cls)}
    for name in kwargs:
        if name not in known:
            raise InvalidOptions(name, kwargs[name], f"unknown option for {cls.__name__}")


# --- fetch options (issue 12: groups, ignore_start_after) ---


def group_limit(value: object) -> GroupLimit | None:
    """Normalise ``group_concurrency``: None, an int >= 1, or ``{"default": N, "tiers": {...}}``."""
    if value is None or isinstance(value, GroupLimit):
        return value
    if isinstance(value, int) and not isinstance(value, bool):
        if not 1 <= value <= INT_MAX:
            raise InvalidOptions("group_concurrency", value, "must be an integer >= 1")
        return GroupLimit(default=value)
    if isinstance(value, Mapping):
        unknown = set(value) - {"default", "tiers"}
        if unknown:
            raise InvalidOptions(
                "group_concurrency", value, f"unknown keys {sorted(unknown)}: use default, tiers"
            )
        tiers = value.get("tiers") or {}
        if not isinstance(tiers, Mapping):
            raise InvalidOptions("group_concurrency.tiers", tiers, "must be a mapping tier -> N")
        default = value.get("default")
        if default is not None and (
            isinstance(default, bool) or not isinstance(default, int) or not 1 <= default <= INT_MAX
        ):
            raise InvalidOptions("group_concurrency.default", default, "must be an integer >= 1")
        return GroupLimit(default=default, tiers=dict(tiers))
    raise InvalidOptions(
        "group_concurrency", value, 'must be an int >= 1 or {"default": N, "tiers": {...}}'
    )


def _tiers(_inst: Any, _attribute: attrs.Attribute[Any], value: dict[str, int]) -> None:
    for tier, limit in value.items():
        if not isinstance(tier, str) or not tier:
            raise InvalidOptions("group_concurrency.tiers", tier, "tier names are non-empty str")
        if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= INT_MAX:
            raise InvalidOptions(f"group_concurrency.tiers[{tier!r}]", limit, "must be an int >= 1")


@attrs.frozen(kw_only=True)
class GroupLimit:
    """At most ``default`` active jobs per ``group_id`` (``tiers[group_tier]`` for a tier
    listed); jobs without a ``group_id`` are not limited. ``default=None`` limits only the
    listed tiers."""

    default: int | None = attrs.field(default=None, validator=int_at_least(1, optional=True))
    tiers: dict[str, int] = attrs.field(factory=dict, validator=_tiers)

    def __attrs_post_init__(self) -> None:
        if self.default is None and not self.tiers:
            raise InvalidOptions("group_concurrency", {}, "needs a default or at least one tier")


@attrs.frozen(kw_only=True)
class FetchOptions:
    """Options of ``fetch``: group limits and whether to ignore ``start_after``."""

    group_concurrency: GroupLimit | None = attrs.field(default=None, converter=group_limit)
    ignore_start_after: bool = attrs.field(default=False, validator=boolean)
    """Also fetch jobs whose ``start_after`` is in the future (never the flow children parked
    at ``'infinity'``)."""
    include_metadata: bool = attrs.field(default=True, validator=boolean)
    """Return full jobs; False: lean ones (:mod:`.lean`). It does not change the claim."""

    @property
    def plain(self) -> bool:
        """No option that changes the claim."""
        return self.group_concurrency is None and not self.ignore_start_after


PLAIN_FETCH = FetchOptions()
"""The options of a fetch that sets none."""
LEAN_FETCH = FetchOptions(include_metadata=False)
"""A plain fetch of lean jobs (what ``Store.fetch`` does by default)."""
