"""Time-ordered job ids (UUID version 7, RFC 9562).

Hand-written because the standard library only gains ``uuid.uuid7`` in Python 3.14. Ids from
one process are strictly increasing (a 12-bit counter and the random bits break ties inside a
millisecond), so jobs sent in one batch, which share ``created_on``, come out of ``fetch`` in
the order they were sent, and new rows land at the right edge of the primary-key index.

A batch's ids are made together (:func:`new_ids`): one clock read, one call for the random
bytes and one lock for all of them. Made one by one they were the largest part of the
client's work in a 1,000-job ``send_many`` (docs/benchmarks.md, "Quiet machine, 2026-12-01
afternoon").
"""

from __future__ import annotations

import os
import threading
import time
import uuid

_lock = threading.Lock()
_last = 0

_RANDOM_BITS = 74
_RANDOM_MASK = (1 << _RANDOM_BITS) - 1
_RAND_B_MASK = (1 << 62) - 1
_VERSION_AND_VARIANT = (0x7 << 76) | (0b10 << 62)
_RANDOM_BYTES = 10
"""Bytes of randomness drawn per id (80 bits, of which 74 are kept)."""

_new = object.__new__
_set = object.__setattr__
_UNKNOWN = uuid.SafeUUID.unknown


def uuid_of_int(value: int) -> uuid.UUID:
    """What ``uuid.UUID(int=value)`` builds, without checking the range of a value known to
    be a UUID's (made here, or read from a uuid column); the standard library builds its own
    UUIDs this way since Python 3.14."""
    made: uuid.UUID = _new(uuid.UUID)
    _set(made, "int", value)
    _set(made, "is_safe", _UNKNOWN)
    return made


def new_ids(count: int) -> list[uuid.UUID]:
    """``count`` fresh UUIDv7s in increasing order, greater than every id this process made
    before."""
    global _last
    random = os.urandom(_RANDOM_BYTES * count)
    from_bytes = int.from_bytes
    payloads = []
    with _lock:
        # 122 payload bits: 48 bits of milliseconds, then 74 random bits.
        now = (time.time_ns() // 1_000_000) << _RANDOM_BITS
        last = _last
        for at in range(0, _RANDOM_BYTES * count, _RANDOM_BYTES):
            payload = now | (from_bytes(random[at : at + _RANDOM_BYTES], "big") & _RANDOM_MASK)
            if payload <= last:
                payload = last + 1
            payloads.append(payload)
            last = payload
        _last = last
    return [
        uuid_of_int(
            ((p >> _RANDOM_BITS) << 80)
            | _VERSION_AND_VARIANT
            | (((p >> 62) & 0xFFF) << 64)
            | (p & _RAND_B_MASK)
        )
        for p in payloads
    ]


def new_id() -> uuid.UUID:
    """A fresh UUIDv7, greater than every id this process made before."""
    return new_ids(1)[0]


def uuid7_at(millis: int, bits: int) -> uuid.UUID:
    """The UUIDv7 of Unix time ``millis`` (milliseconds) whose 74 other payload bits are the
    low bits of ``bits``: for ids that must be derived (the same in every process) yet sort
    by time, as a scheduled job's (time: its slot) or the in-memory engine's dead-letter
    copies (time: the copy's; bits: a counter)."""
    return uuid_of_int(
        ((millis & 0xFFFF_FFFF_FFFF) << 80)
        | _VERSION_AND_VARIANT
        | (((bits >> 62) & 0xFFF) << 64)
        | (bits & _RAND_B_MASK)
    )
