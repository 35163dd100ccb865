"""attrs validators that raise :class:`InvalidOptions` naming the field and the value."""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Callable, Mapping
from typing import Any

import attrs

from .errors import InvalidOptions

Validator = Callable[[Any, "attrs.Attribute[Any]", Any], None]

INT_MAX = 2**31 - 1
"""The largest value the integer option columns hold."""

QUEUE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_\-./]{0,99}")
SCHEMA_NAME = re.compile(r"[a-z_][a-z0-9_]{0,62}")


def is_int(value: object) -> bool:
    """True for ints that are not bools (``True`` is an int in Python, never a count here)."""
    return isinstance(value, int) and not isinstance(value, bool)


def int_at_least(minimum: int, *, optional: bool = False) -> Validator:
    """Validator: an int (not bool) >= ``minimum``; ``None`` allowed when ``optional``."""

    def check(_inst: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
        if value is None and optional:
            return
        if not is_int(value) or not minimum <= value <= INT_MAX:
            raise InvalidOptions(
                attribute.name, value, f"must be an integer from {minimum} to {INT_MAX}"
            )

    return check


def optional_int(_inst: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
    """Validator: ``None`` or an int (not bool)."""
    if value is not None and (not is_int(value) or not -INT_MAX - 1 <= value <= INT_MAX):
        raise InvalidOptions(attribute.name, value, "must be a 32-bit integer")


def boolean(_inst: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
    """Validator: a bool."""
    if not isinstance(value, bool):
        raise InvalidOptions(attribute.name, value, "must be a bool")


def optional_bool(_inst: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
    """Validator: ``None`` or a bool."""
    if value is not None and not isinstance(value, bool):
        raise InvalidOptions(attribute.name, value, "must be a bool")


def optional_text(max_length: int) -> Validator:
    """Validator: ``None`` or a non-empty str of at most ``max_length`` characters."""

    def check(_inst: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
        if value is None:
            return
        if not isinstance(value, str) or not value or len(value) > max_length:
            raise InvalidOptions(
                attribute.name, value, f"must be a non-empty string of at most {max_length} chars"
            )
        check_storable_text(attribute.name, value)

    return check


def check_storable_text(field: str, value: str) -> None:
    """Refuse a string PostgreSQL's ``text`` cannot store: a NUL character, or a lone
    surrogate (no UTF-8 form)."""
    if "\x00" in value:
        raise InvalidOptions(field, value, "contains a NUL character, which text cannot store")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise InvalidOptions(
            field, value, "contains a lone surrogate, which has no UTF-8 form"
        ) from None


MAX_DELAY = 365 * 86_400
"""The longest delay in seconds (``retry_delay``, ``retry_delay_max``): with backoff
(x 2**16, x 2 jitter) it still stays within PostgreSQL's timestamps."""


def delay_seconds(_inst: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
    """Validator: ``None`` or an int (not bool) from 0 to :data:`MAX_DELAY`."""
    if value is not None and (not is_int(value) or not 0 <= value <= MAX_DELAY):
        raise InvalidOptions(
            attribute.name, value, f"must be an integer from 0 to {MAX_DELAY} (365 days)"
        )


def check_queue_name(name: object, field: str = "queue") -> str:
    """Return ``name`` if it is a valid queue name, else raise :class:`InvalidOptions`."""
    if not isinstance(name, str) or not QUEUE_NAME.fullmatch(name):
        raise InvalidOptions(
            field,
            name,
            "queue names are 1-100 letters, digits or _ - . / and start with a letter or digit",
        )
    return name


def queue_name(_inst: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
    """Validator form of :func:`check_queue_name` (``None`` allowed)."""
    if value is not None:
        check_queue_name(value, attribute.name)


RESERVED_SCHEMAS = frozenset({"public", "information_schema"})
"""Schemas alkstore will not install into: shared with everything else in the database."""


def check_schema_name(name: object) -> str:
    """Return ``name`` if it is a valid schema identifier, else raise :class:`InvalidOptions`."""
    if not isinstance(name, str) or not SCHEMA_NAME.fullmatch(name):
        raise InvalidOptions(
            "schema", name, "must be 1-63 lowercase letters, digits or _, not starting with a digit"
        )
    if name.startswith("pg_") or name in RESERVED_SCHEMAS:
        raise InvalidOptions(
            "schema",
            name,
            "is reserved (pg_*, public, information_schema): choose a schema of its own",
        )
    return name


def schema_name(_inst: Any, _attribute: attrs.Attribute[Any], value: Any) -> None:
    """Validator form of :func:`check_schema_name`."""
    check_schema_name(value)


def check_engine_options(allowed: frozenset[str], options: Mapping[str, Any]) -> None:
    """Refuse an ``engine_options`` key an engine does not accept, naming it."""
    unknown = sorted(set(options) - allowed)
    if unknown:
        key = unknown[0]
        raise InvalidOptions(f"engine_options.{key}", options[key], "unknown engine option")


MAX_TIMEOUT = 86_400.0 * 24
"""The longest timeout option, in seconds (PostgreSQL's timeouts are int milliseconds)."""


def optional_seconds(_inst: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
    """Validator: ``None`` or a finite number of seconds from 0 (no limit) to
    :data:`MAX_TIMEOUT`."""
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise InvalidOptions(attribute.name, value, "must be a number of seconds")
    if not 0 <= value <= MAX_TIMEOUT:  # also refuses NaN
        raise InvalidOptions(attribute.name, value, f"must be from 0 to {MAX_TIMEOUT:g} seconds")


EARLIEST_TIME = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
"""The earliest absolute time a caller may pass (``start_after``): any past time means
"now", and none earlier reaches the ends of what a driver can encode (asyncpg stores
``datetime.min`` as ``-infinity``)."""
LATEST_TIME = dt.datetime(9900, 1, 1, tzinfo=dt.UTC)
"""The latest absolute time a caller may pass: a time computed from it (``keep_until`` adds
at most ``2**31 - 1`` seconds, 68 years) stays inside year 9999, which every driver reads
back into a Python ``datetime``."""


def bounded_time(field: str, value: dt.datetime) -> dt.datetime:
    """``value`` (an aware datetime), refused with :class:`InvalidOptions` outside
    [:data:`EARLIEST_TIME`, :data:`LATEST_TIME`]."""
    if not EARLIEST_TIME <= value <= LATEST_TIME:
        raise InvalidOptions(
            field,
            value,
            f"must be from {EARLIEST_TIME.isoformat()} to {LATEST_TIME.isoformat()}: "
            "the range every driver and server round-trips",
        )
    return value
