"""The ``alkstore bench`` commands: each measures, prints its tables and saves its results.

:func:`run` holds what every command shares: find or start the server, warn when it is not
durable, show progress, fingerprint the environment, write the JSON and draw the chart. Each
command function only says what to measure and which tables to show; it lives in the module
named after it (:mod:`.drain`, :mod:`.peers`, ...), :func:`run` and the rest they share in
:mod:`.common`.
"""

from .common import Measured, Options, Table, cells, run
from .contention import contention
from .drain import drain
from .enqueue import enqueue
from .latency import latency
from .peers import peers
from .pressure import pressure
from .rss import rss
from .scale import scale

__all__ = [
    "Measured",
    "Options",
    "Table",
    "cells",
    "contention",
    "drain",
    "enqueue",
    "latency",
    "peers",
    "pressure",
    "rss",
    "run",
    "scale",
]
