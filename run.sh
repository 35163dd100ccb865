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
    # Each run of the conformance suite records its outcomes for the compatibility matrix.
    runs=$(mktemp -d)
    trap 'rm -rf "$runs"' EXIT
    trap 'kill $(jobs -p) 2>/dev/null; exit 130' INT TERM
    args=("$@")
    record() { echo -p alkstore.conformance.matrix --alkstore-matrix-out "$runs/$1.jsonl"; }
    own_tests() {
      # alkstore's own tests and the conformance suite on PostgreSQL x every driver.
      # shellcheck disable=SC2046
      pytest_step -q $(record 15) "${args[@]}"
    }
    emulated() {
      # The distributed engines on stock PostgreSQL behind their emulation guards.
      local engine status=0
      for engine in cockroachdb yugabytedb citus-distributed; do
        echo "== conformance on emulated $engine (psycopg)"
        pytest_step -q --alkstore-engine "$engine" --alkstore-emulate \
          --alkstore-driver psycopg --pyargs alkstore.conformance.suite "${args[@]}" || status=1
      done
      return "$status"
    }
    embedded() {
      # The embedded engine (PGlite through its Node.js bridge) x every sync/async driver.
      echo "== conformance on PGlite (psycopg, asyncpg, pg8000)"
      pytest_step -q --alkstore-engine pglite --alkstore-driver psycopg,asyncpg,pg8000 \
        --pyargs alkstore.conformance.suite "${args[@]}"
    }
    versions() {
      # The other PostgreSQL versions (server binaries installed into the cache on first
      # use; a version that cannot be had is skipped with the reason), then PostgreSQL 15
      # behind PgBouncer in transaction pooling mode (apt-get installs it when missing).
      local target version status=0
      for target in 14 16 17 18 15-pgbouncer; do
        version=${target%-pgbouncer}
        local bouncer=()
        [ "$target" != "$version" ] && bouncer=(--alkstore-pgbouncer)
        echo "== conformance on PostgreSQL $version${bouncer:+ behind PgBouncer} (psycopg, asyncpg)"
        # shellcheck disable=SC2046
        pytest_step -q $(record "$target") --alkstore-pg-version "$version" "${bouncer[@]}" \
          --alkstore-driver psycopg,asyncpg --pyargs alkstore.conformance.suite "${args[@]}" \
          || status=1
      done
      return "$status"
    }
    lane() {
      # Runs the steps one after another, every line tagged with the lane's name; fails
      # when any step failed (all still run).
      local name=$1 rc
      shift
      set +e
      (
        status=0
        for step in "$@"; do "$step" || status=1; done
        exit "$status"
      ) 2>&1 | sed -u "s/^/[$name] /"
      rc=${PIPESTATUS[0]}
      set -e
      return "$rc"
    }
    # Two lanes at once: a test waits on its server about half the time, so two keep both
    # cores busy (each step has its own throwaway servers; installers take file locks).
    status=0
    lane own own_tests embedded &
    own=$!
    lane suite emulated versions &
    suite=$!
    wait "$own" || status=1
    wait "$suite" || status=1
    # The matrix of these runs; a full run (no pytest options) also writes it into the docs.
    if [ "$#" -eq 0 ]; then
      "$PY" -m alkstore.conformance.compat "$runs" \
        --json docs/compat-matrix.json --markdown docs/engines.md
    else
      "$PY" -m alkstore.conformance.compat "$runs"
    fi
    exit "$status"
    ;;
  *)
    echo "usage: ./run.sh demo [demo options] | ./run.sh test [pytest options]" >&2
    exit 2
    ;;
esac
