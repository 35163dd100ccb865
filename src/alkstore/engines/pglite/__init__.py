"""Embedded PostgreSQL for alkstore: PGlite (PostgreSQL in WASM) in a Node.js child process.

:func:`start_bridge` starts ``node bridge.mjs``, which serves one PGlite database (in memory
or in a data directory) over the PostgreSQL wire protocol on ``127.0.0.1``; connect with
:attr:`Bridge.dsn`. The bridge exits when the Python process that started it closes it or
dies. The npm packages are installed once per user by :func:`ensure_installed`.
"""

from alkstore.engines.pglite.bridge import Bridge, BridgeError, ensure_installed, start_bridge

__all__ = ["Bridge", "BridgeError", "ensure_installed", "start_bridge"]
