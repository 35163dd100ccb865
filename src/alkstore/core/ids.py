"""Time-ordered job ids (UUID version 7, RFC 9562).

Hand-written because the standard library only gains ``uuid.uuid7`` in Python 3.14. Ids from
one process are strictly increasing (a 12-bit counter and the random bits break ties inside a
millisecond), so jobs sent in one batch, which share ``created_on``, come out of ``fetch`` in
the order they were sent, and new rows land at the right edge of the primary-key index.
"""

from __future__ import annotations

import os
import threading
import time
import uuid

_lock = threading.Lock()
_last = 0


def new_id() -> uuid.UUID:
    """A fresh UUIDv7, greater than every id this process made before."""
    global _last
    with _lock:
        # 122 payload bits: 48 bits of milliseconds, then 74 random bits.
        payload = ((time.time_ns() // 1_000_000) << 74) | (
            int.from_bytes(os.urandom(10), "big") & ((1 << 74) - 1)
        )
        if payload <= _last:
            payload = _last + 1
        _last = payload
    ms, rand_a, rand_b = payload >> 74, (payload >> 62) & 0xFFF, payload & ((1 << 62) - 1)
    return uuid.UUID(int=(ms << 80) | (0x7 << 76) | (rand_a << 64) | (0b10 << 62) | rand_b)
