#!/usr/bin/env bash
# The two commands of the README: `./run.sh demo` and `./run.sh test`.
# Each sets up what it needs on a fresh machine (Python 3.11+ and Node 20 present) first.
set -euo pipefail
cd "$(dirname "$0")"

VENV=.venv
PY="$VENV/bin/python"

setup() {
  if [ ! -x "$PY" ]; then
    python3 -m venv "$VENV"
  fi
  # Install each extra once, again only when the project's dependency list changed.
  local stamp="$VENV/.alkstore-installed-$1"
  if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ]; then
    "$PY" -m pip install --quiet --upgrade pip
    "$PY" -m pip install --quiet -e ".[$1]"
    touch "$stamp"
  fi
}

pytest_step() {
  # pytest exits 5 when it collected no test: for us that is a broken selection, not a pass.
  local status=0
  "$VENV/bin/pytest" "$@" || status=$?
  if [ "$status" -eq 5 ]; then
    echo "pytest collected no tests for: $*" >&2
    return 1
  fi
  return "$status"
}

case "${1:-}" in
  demo)
    setup all
    shift
    exec "$VENV/bin/alkstore" demo "$@"
    ;;
  test)
    setup dev
    shift
    "$VENV/bin/ruff" check .
    "$VENV/bin/ruff" format --check .
    "$VENV/bin/mypy"
    # alkstore's own tests and the conformance suite on PostgreSQL x every driver.
    pytest_step -q "$@"
    # The distributed engines on stock PostgreSQL behind their emulation guards.
    for engine in cockroachdb yugabytedb citus-distributed; do
      pytest_step -q --alkstore-engine "$engine" --alkstore-emulate \
        --alkstore-driver psycopg --pyargs alkstore.conformance.suite "$@"
    done
    # The embedded engine (PGlite through its Node.js bridge) x every sync/async driver.
    pytest_step -q --alkstore-engine pglite --alkstore-driver psycopg,asyncpg,pg8000 \
      --pyargs alkstore.conformance.suite "$@"
    ;;
  *)
    echo "usage: ./run.sh demo [demo options] | ./run.sh test [pytest options]" >&2
    exit 2
    ;;
esac
