"""The reference engine: stock PostgreSQL (13+).

How the modules fit, bottom up (every import points down this list, none back up):

- :mod:`.schema` (the DDL and its migrations), :mod:`.identifiers` (quoting), :mod:`.sql`
  (SQL fragments shared by the families);
- :mod:`.base`: :class:`~.base.EngineBase`, the engine's state (schema, effective
  capabilities, isolation) and the plan builders every family uses;
- :mod:`.runtime`: functions of an ``EngineBase`` for the worker runtime (the supervisor's
  claimed pass, a worker's watch, the NOTIFY channel) and :func:`~.runtime.notifying`, which
  the writing families wrap their statements in;
- the operation families, each a mixin on ``EngineBase``: :mod:`.migrate`, :mod:`.policies`
  (queue rules), :mod:`.queues`, :mod:`.send`, :mod:`.claim`, :mod:`.settle`,
  :mod:`.failing`, :mod:`.maintenance`, :mod:`.listing`, :mod:`.jobs`, :mod:`.flows`;
  :mod:`.schedules` and :mod:`.pubsub` are functions of an engine, which :mod:`.messaging`
  binds as the mixin of the contract's schedule and pub/sub plans;
- :mod:`.hooks`: the test hooks, plans on the schema's tables alone;
- :mod:`.engine`: :class:`PostgresEngine`, the class composing the mixins, with its
  ``test_hooks()`` and ``worker_runtime()``;
- :mod:`.waiting`: the plans of ``wait``'s result channel, functions of a built engine.

``tests/test_layering.py`` fails on any import cycle, type-only imports included.
"""

from .engine import POSTGRES, PostgresEngine

__all__ = ["POSTGRES", "PostgresEngine"]
