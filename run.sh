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
    # Each run of the conformance suite records its outcomes for the compatibility matrix.
    runs=$(mktemp -d)
    trap 'rm -rf "$runs"' EXIT
    trap 'kill $(jobs -p) 2>/dev/null; exit 130' INT TERM
    args=("$@")
    record() { echo -p alkstore.conformance.matrix --alkstore-matrix-out "$runs/$1.jsonl"; }
    # The matrix cells (every server/driver pair but PostgreSQL 15) run each property test
    # of the suite with at most 8 examples (hypothesis profile alkstore-matrix,
    # docs/conformance.md#examples); PostgreSQL 15 x every driver keeps the full counts.
    matrix=(--hypothesis-profile alkstore-matrix)
    lint() {
      local status=0
      "$VENV/bin/ruff" check . || status=1
      "$VENV/bin/ruff" format --check . || status=1
      "$VENV/bin/mypy" || status=1
      return "$status"
    }
    # alkstore's own tests (tests/) in three parts, one per lane: the fault suite and the
    # embedded engine's own tests run beside the rest.
    own_elsewhere=(--ignore=tests/faults --ignore-glob='tests/test_pglite_*')
    own_tests() {
      echo "== alkstore's own tests (unit, browser, examples, CLI, bench smoke)"
      pytest_step -q tests "${own_elsewhere[@]}" "${args[@]}"
    }
    fault_suite() {
      echo "== alkstore's fault suite (tests/faults)"
      pytest_step -q tests/faults "${args[@]}"
    }
    pglite_tests() {
      echo "== alkstore's own tests of the embedded engine (tests/test_pglite_*)"
      pytest_step -q tests/test_pglite_*.py "${args[@]}"
    }
    postgres15() {
      # The conformance suite on the system's PostgreSQL (15) x every driver, full counts.
      echo "== conformance on PostgreSQL 15 (every driver)"
      # shellcheck disable=SC2046
      pytest_step -q $(record 15) --pyargs alkstore.conformance.suite "${args[@]}"
    }
    emulated() {
      # The distributed engines on stock PostgreSQL behind their emulation guards.
      local engine status=0
      for engine in cockroachdb yugabytedb citus-distributed; do
        echo "== conformance on emulated $engine (psycopg)"
        pytest_step -q "${matrix[@]}" --alkstore-engine "$engine" --alkstore-emulate \
          --alkstore-driver psycopg --pyargs alkstore.conformance.suite "${args[@]}" || status=1
      done
      return "$status"
    }
    embedded() {
      # The embedded engine (PGlite through its Node.js bridge) x every sync/async driver.
      echo "== conformance on PGlite (psycopg, asyncpg, pg8000)"
      pytest_step -q "${matrix[@]}" --alkstore-engine pglite \
        --alkstore-driver psycopg,asyncpg,pg8000 --pyargs alkstore.conformance.suite "${args[@]}"
    }
    memory() {
      # The in-memory engine (memory://, the reference model in this process), both faces.
      echo "== conformance on the in-memory engine (sync, async)"
      pytest_step -q --alkstore-engine memory \
        --pyargs alkstore.conformance.suite "${args[@]}"
    }
    version() {
      # Another PostgreSQL version (14, 16, 17, 18: server binaries installed into the cache
      # on first use; a version that cannot be had is skipped with the reason), or
      # 15-pgbouncer: PostgreSQL 15 behind PgBouncer in transaction pooling mode (apt-get
      # installs it when missing).
      local target=$1 version=${1%-pgbouncer}
      local bouncer=()
      [ "$target" != "$version" ] && bouncer=(--alkstore-pgbouncer)
      echo "== conformance on PostgreSQL $version${bouncer:+ behind PgBouncer} (psycopg, asyncpg)"
      # shellcheck disable=SC2046
      pytest_step -q "${matrix[@]}" $(record "$target") --alkstore-pg-version "$version" \
        "${bouncer[@]}" --alkstore-driver psycopg,asyncpg --pyargs alkstore.conformance.suite \
        "${args[@]}"
    }
    lane() {
      # Runs the steps (a function name and its arguments each) one after another, every
      # line tagged with the lane's name; fails when any step failed (all still run).
      local name=$1 rc
      shift
      set +e
      (
        status=0
        # shellcheck disable=SC2086
        for step in "$@"; do $step || status=1; done
        exit "$status"
      ) 2>&1 | sed -u "s/^/[$name] /"
      rc=${PIPESTATUS[0]}
      set -e
      return "$rc"
    }
    # Three lanes at once on two cores: a conformance run keeps about three quarters of a
    # core busy (the rest is round trips and workers' poll waits), so three lanes keep both
    # busy. Balanced on step times measured in a fresh clone's run (minutes, three lanes,
    # conformance schemas reused between tests, a loaded machine): own tests 7.8, fault
    # suite 1.5, own PGlite tests 2.7, PostgreSQL 15 x 4 drivers 5.3, PGlite x 3 drivers
    # 2.8, emulated 3.7, each other version 1.1-1.6; lanes 10.7 / 11.9 / 9.5, 13 in all.
    # Each step has its own throwaway servers; installers take file locks.
    status=0
    pids=()
    lane own own_tests memory "version 18" "version 14" &
    pids+=($!)
    lane pg15 postgres15 embedded pglite_tests "version 17" &
    pids+=($!)
    lane matrix lint emulated fault_suite "version 16" "version 15-pgbouncer" &
    pids+=($!)
    for pid in "${pids[@]}"; do wait "$pid" || status=1; done
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
