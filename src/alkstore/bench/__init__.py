"""The benchmark harness behind ``alkstore bench``.

:mod:`.commands` runs each command (drain, contention, enqueue, latency, scale, peers) from
shared pieces. :mod:`.server` finds or starts a durable PostgreSQL. :mod:`.drain` and
:mod:`.peers` measure one drain cell each, through :mod:`.loops` (N concurrent fetch +
complete loops on threads or asyncio tasks). :mod:`.isolation` runs every cell in a fresh
process. :mod:`.measure` turns samples into percentiles and reads peak RSS.
:mod:`.environment` fingerprints the run. :mod:`.report` prints the rich tables, writes the
JSON and draws the charts. See ``docs/benchmarks.md``.
"""
