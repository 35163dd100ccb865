"""``alkstore conformance``: run the shared conformance suite against one backend, as a matrix.

The suite runs in a pytest subprocess, in an empty temporary directory with an empty pytest
configuration: a crashing driver or a hung test cannot take this process with it, and the
pytest settings and ``conftest.py`` files of the directory you run it from do not apply. The
subprocess loads the opt-in conformance plugin (:mod:`alkstore.conformance.plugin`) and the
matrix recorder (:mod:`alkstore.conformance.matrix`), whose JSON lines drive a progress bar
while the suite runs and the matrix afterwards. The DSN reaches the subprocess through
``ALKSTORE_DSN`` in its environment, never on a command line others can read.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import site
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import IO, Any
from urllib.parse import urlsplit, urlunsplit

import attrs
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

import alkstore

from ..conformance.harness import (
    MEMORY_ENGINE,
    MEMORY_VARIANTS,
    driver_variants,
    installed_variants,
)
from ..conformance.matrix import (
    OUT_OPTION,
    Matrix,
    Records,
    build_matrix,
    exit_status,
    one_line,
    parse_record_lines,
    read_records,
    render,
)
from ..drivers import not_installed

AUTO = "auto"
"""``--engine`` value that detects the engine from the server (as ``connect(engine="auto")``)."""
SUITE = "alkstore.conformance.suite"
"""The package holding the shared suite."""

PLUGINS = ("alkstore.conformance.plugin", "alkstore.conformance.matrix")
"""pytest plugins the run loads by module name."""

SUITE_NEEDS = ("pytest", "hypothesis")
"""Modules the suite imports, all brought by alkstore's ``conformance`` extra."""

CONFORMANCE_INSTALL = 'pip install "alkstore[conformance]"'
"""The command that installs what the suite needs."""

TEST_TIMEOUT = 300
"""Seconds one test may take when pytest-timeout is installed."""

EXIT_STATUSES = """\
exit status:
  0  every selected test passed or was skipped
  1  a test failed (or a suite module failed to import)
  2  the suite could not run to its end: bad arguments, unreachable database, pytest error
  5  no test was selected (check -k)
"""
"""The exit statuses, as ``--help`` lists them."""


def register(subparsers: Any) -> None:
    """Add the ``conformance`` subcommand."""
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "conformance",
        help="run the shared conformance suite against a backend",
        description=(
            "Run alkstore's conformance suite against one database and engine, once per\n"
            "driver, and print the outcomes as a matrix of areas by drivers, with every\n"
            "skip's capability and reason and every failure's message."
        ),
        epilog=EXIT_STATUSES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--dsn",
        default=None,
        help="postgresql://… of the database to test (default: a throwaway PostgreSQL "
        "cluster started for the run; each test uses a fresh schema and drops it)",
    )
    parser.add_argument(
        "--engine",
        default="postgres",
        help=f"engine name (default postgres), or {AUTO!r} to detect it from the server "
        f"(never the sharded Citus mode); one of: {', '.join(_engines())}",
    )
    parser.add_argument(
        "--driver",
        default="all",
        help=f"{', '.join(driver_variants())}, a comma list of them, or all (the default)",
    )
    parser.add_argument(
        "--emulate",
        action="store_true",
        help="run a distributed engine on stock PostgreSQL behind its emulation guard",
    )
    parser.add_argument(
        "--pg-version",
        type=int,
        metavar="MAJOR",
        help="PostgreSQL major version of the throwaway cluster, 14 to 18 (default: the "
        "system's; others are installed into ~/.cache/alkstore once)",
    )
    parser.add_argument(
        "--pgbouncer",
        action="store_true",
        help="go through PgBouncer in transaction pooling mode: one is started in front of "
        "the throwaway cluster, or --dsn names one; stores connect with pooler='pgbouncer'",
    )
    parser.add_argument(
        "--json", metavar="FILE", type=Path, help="also write the matrix to FILE as JSON"
    )
    parser.add_argument("-k", dest="keyword", metavar="EXPR", help="select tests as pytest -k does")
    parser.add_argument(
        "-v", "--verbose", action="store_true", help="show pytest's own output as it runs"
    )
    parser.set_defaults(handler=run)


def _engines() -> list[str]:
    from ..engines import available

    return available()


def parse_drivers(text: str, engine: str = "postgres") -> list[str]:
    """The drivers ``--driver`` names: ``all`` (the installed ones), one name, or a comma list.
    The in-memory engine has drivers of its own: its sync and async face."""
    known = list(MEMORY_VARIANTS) if engine == MEMORY_ENGINE else driver_variants()
    if text.strip() == "all":
        return known if engine == MEMORY_ENGINE else installed_variants()
    names = [name.strip() for name in text.split(",") if name.strip()]
    unknown = [name for name in names if name not in known]
    if unknown or not names:
        wrong = ", ".join(unknown) or repr(text)
        raise ValueError(f"unknown driver {wrong}; choose from {', '.join(known)} or all")
    return names


def redact(dsn: str) -> str:
    """``dsn`` with its password replaced by ``***``."""
    parts = urlsplit(dsn)
    if parts.password is None:
        return dsn
    netloc = parts.netloc.rsplit("@", 1)
    user = netloc[0].split(":", 1)[0]
    return urlunsplit(parts._replace(netloc=f"{user}:***@{netloc[1]}"))


def probe(dsn: str) -> tuple[str | None, str | None]:
    """``(why the server at dsn cannot be queried, the engine it looks like)``.

    Only ``postgres://`` and ``postgresql://`` URIs are checked (a ``pglite://`` database is
    started by each test itself: ``(None, "pglite")``), through the first sync driver that is
    installed. The engine comes from the same detection as ``connect(engine="auto")``.
    """
    if urlsplit(dsn).scheme not in ("postgres", "postgresql"):
        return None, "pglite"
    from ..core.errors import DriverUnavailable
    from ..drivers import names, sync_driver
    from ..drivers.base import DriverSettings
    from ..engines.detect import detect_plan, engine_for
    from ..runner import run_sync

    for name in names(is_async=False):
        try:
            driver = sync_driver(name)
        except DriverUnavailable:
            continue
        try:
            source = driver.open(dsn, DriverSettings(pool_size=1, connect_timeout=10))
            try:
                detected = engine_for(run_sync(source, driver, detect_plan()))
            finally:
                source.close()
        except Exception as exc:
            return one_line(f"{type(exc).__name__}: {exc}"), None
        return None, detected
    return None, None


def unreachable(dsn: str) -> str | None:
    """Why the PostgreSQL server at ``dsn`` cannot be queried; None when it answers."""
    return probe(dsn)[0]


def argument_problem(args: argparse.Namespace) -> str | None:
    """What is wrong with the arguments before anything runs; None when they are usable."""
    lacking = [name for name in SUITE_NEEDS if importlib.util.find_spec(name) is None]
    if lacking:
        return f"the conformance suite needs {', '.join(lacking)}: {CONFORMANCE_INSTALL}"
    try:
        drivers = parse_drivers(args.driver, args.engine)
    except ValueError as exc:
        return f"--driver: {exc}"
    if not drivers:
        return f"--driver all: no driver is installed: {'; '.join(not_installed().values())}"
    missing = not_installed()
    asked = [name for name in drivers if name in missing]
    if asked:
        return "--driver: not installed: " + "; ".join(f"{n} ({missing[n]})" for n in asked)
    if args.pg_version is not None and args.dsn:
        return "--pg-version picks the throwaway cluster's version: not with --dsn"
    engines = _engines()
    if args.engine == AUTO:
        if args.emulate:
            return "--emulate needs an explicit --engine (auto detects the real server)"
        return None
    if args.engine not in engines:
        return f"--engine: unknown engine {args.engine!r}; known engines: {', '.join(engines)}"
    if args.engine == MEMORY_ENGINE and (args.dsn or args.pg_version or args.pgbouncer):
        return "--engine memory reaches no database: no --dsn, --pg-version or --pgbouncer"
    if args.emulate:
        from ..engines import engine_class

        try:
            profile = engine_class(args.engine).description.emulation_profile
        except Exception as exc:
            return f"--engine {args.engine}: cannot load it: {exc}"
        if profile is None:
            return f"--emulate: engine {args.engine!r} has no emulated mode"
    return None


def pytest_command(
    args: argparse.Namespace, directory: Path, out: Path, suite_dir: Path
) -> list[str]:
    """The pytest command line of the run (the DSN is passed in the environment)."""
    ini = directory / "pytest.ini"
    ini.write_text("[pytest]\n", encoding="utf-8")
    command = [sys.executable, "-m", "pytest", "--pyargs", SUITE]
    command += ["-c", str(ini), "--rootdir", str(suite_dir), "--confcutdir", str(suite_dir)]
    command += ["-p", "no:cacheprovider"]
    for plugin in PLUGINS:
        command += ["-p", plugin]
    drivers = ",".join(parse_drivers(args.driver, args.engine))
    command += ["--alkstore-engine", args.engine, "--alkstore-driver", drivers]
    if args.emulate:
        command.append("--alkstore-emulate")
    if args.pg_version is not None:
        command += ["--alkstore-pg-version", str(args.pg_version)]
    if args.pgbouncer:
        command.append("--alkstore-pgbouncer")
    command += [OUT_OPTION, str(out), "--continue-on-collection-errors"]
    command += ["-o", "xfail_strict=true", "--tb=short"]
    if importlib.util.find_spec("pytest_timeout") is not None:
        command += ["-o", f"timeout={TEST_TIMEOUT}"]
    if args.keyword:
        command += ["-k", args.keyword]
    command.append("-v" if args.verbose else "-q")
    return command


def pytest_environment(dsn: str | None) -> dict[str, str]:
    """This process's environment without anything that would steer the run but the options.

    ``ALKSTORE_*`` (the plugin's option defaults), ``PYTEST_ADDOPTS`` and ``PYTEST_PLUGINS``
    are removed; ``ALKSTORE_DSN`` is set to ``dsn``; the directory alkstore is imported from
    goes first on ``PYTHONPATH`` (unless it is a site-packages directory, which the
    subprocess finds anyway) so that the subprocess tests this very copy.
    """
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith("ALKSTORE_") and key not in ("PYTEST_ADDOPTS", "PYTEST_PLUGINS")
    }
    if dsn:
        env["ALKSTORE_DSN"] = dsn
    root = Path(alkstore.__file__).resolve().parents[1]
    site_dirs = {Path(p).resolve() for p in (*site.getsitepackages(), site.getusersitepackages())}
    if root not in site_dirs:
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(root), env.get("PYTHONPATH")) if p)
    return env


@attrs.frozen
class SuiteRun:
    """What one run of the suite left: its records, pytest's exit status and output."""

    records: Records
    status: int
    """pytest's exit status (negative: killed by that signal)."""
    output: str
    """pytest's own output (empty when it went to the terminal)."""
    seconds: float


def run_suite(args: argparse.Namespace, console: Console) -> SuiteRun:
    """Run the suite in a pytest subprocess and collect what it recorded."""
    spec = importlib.util.find_spec(SUITE)
    if spec is None or spec.origin is None:
        raise RuntimeError(f"{SUITE} is not importable")
    suite_dir = Path(spec.origin).parent
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="alkstore-conformance-") as tmp:
        directory = Path(tmp)
        out = directory / "outcomes.jsonl"
        out.touch()
        log_path = directory / "pytest.log"
        command = pytest_command(args, directory, out, suite_dir)
        with log_path.open("w", encoding="utf-8") as log:
            sink: IO[str] | None = None if args.verbose else log
            process = subprocess.Popen(
                command,
                cwd=directory,
                env=pytest_environment(args.dsn),
                stdin=subprocess.DEVNULL,
                stdout=sink,
                stderr=subprocess.STDOUT if sink is not None else None,
            )
            try:
                if args.verbose:
                    process.wait()
                else:
                    _follow(process, out, console, args)
            except KeyboardInterrupt:
                _stop(process)
                raise
        return SuiteRun(
            records=read_records(out),
            status=process.returncode,
            output=log_path.read_text(encoding="utf-8", errors="replace"),
            seconds=time.monotonic() - started,
        )


def _follow(
    process: subprocess.Popen[bytes], out: Path, console: Console, args: argparse.Namespace
) -> None:
    """Show a progress bar fed by the recorder's lines until the subprocess exits."""
    columns = (
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
    )
    label = f"conformance [bold]{args.engine}[/bold] ({args.driver})"
    with (
        Progress(*columns, console=console, transient=True) as progress,
        out.open(encoding="utf-8") as stream,
    ):
        task = progress.add_task(label, total=None)
        partial, failed = "", 0
        while True:
            exited = process.poll() is not None
            *lines, partial = (partial + stream.read()).split("\n")
            records = parse_record_lines(lines)
            if records.collected is not None:
                progress.update(task, total=records.collected)
            failed += sum(o.outcome == "failed" for o in records.outcomes)
            suffix = f" [red]{failed} failed[/red]" if failed else ""
            progress.update(task, advance=len(records.outcomes), description=label + suffix)
            if exited:
                return
            time.sleep(0.1)


def _stop(process: subprocess.Popen[bytes]) -> None:
    """Let an interrupted pytest finish (it got the Ctrl-C too); terminate it if it lingers."""
    try:
        process.wait(timeout=30)
    except subprocess.TimeoutExpired:
        process.terminate()
        process.wait(timeout=30)


def _title(args: argparse.Namespace) -> str:
    mode = " (emulated)" if args.emulate else ""
    version = f" {args.pg_version}" if args.pg_version is not None else ""
    where = redact(args.dsn) if args.dsn else f"a throwaway PostgreSQL{version}"
    if args.engine == MEMORY_ENGINE:
        where = "this process (no database)"
    pooler = " through PgBouncer (transaction pooling)" if args.pgbouncer else ""
    return f"alkstore conformance: engine {args.engine}{mode} on {where}{pooler}"


def _drivers_not_installed(args: argparse.Namespace) -> dict[str, str]:
    """The drivers ``--driver all`` left out, each with the command that installs it."""
    if args.engine == MEMORY_ENGINE or args.driver.strip() != "all":
        return {}
    return not_installed()


def report_json(args: argparse.Namespace, matrix: Matrix, run: SuiteRun, status: int) -> Any:
    """The JSON document ``--json`` writes: the run's settings, the matrix and the status."""
    return {
        "engine": args.engine,
        "emulate": bool(args.emulate),
        "drivers": parse_drivers(args.driver, args.engine),
        "drivers_not_installed": _drivers_not_installed(args),
        "dsn": redact(args.dsn) if args.dsn else None,
        "pg_version": args.pg_version,
        "pgbouncer": bool(args.pgbouncer),
        "keyword": args.keyword,
        "exit_status": status,
        "pytest_exit_status": run.status,
        "seconds": round(run.seconds, 3),
        **matrix.to_json(),
    }


def _explain(status: int, run: SuiteRun, args: argparse.Namespace, console: Console) -> None:
    """Say why a run that did not fail a test still did not succeed."""
    if status == 5:
        selection = f" matching -k {args.keyword!r}" if args.keyword else ""
        console.print(f"[red]no tests collected{selection}[/red]")
    elif status == 2 or (status != 0 and run.records.collected is None):
        console.print(
            f"[red]the suite did not run to its end (pytest exit status {run.status})[/red]"
        )
        tail = run.output.strip().splitlines()[-25:]
        if tail:
            console.print("\n".join(tail), markup=False, highlight=False)


def run(args: argparse.Namespace) -> int:
    """Handler of ``alkstore conformance``: run the suite, print the matrix, return the status."""
    console = Console()
    problem = argument_problem(args)
    detected = "postgres"  # what the throwaway cluster is, when no DSN is given
    if problem is None and args.dsn:
        reason, detected_here = probe(args.dsn)
        detected = detected_here or detected
        if reason is not None:
            problem = f"cannot reach the database at {redact(args.dsn)}: {reason}"
    if problem is None and args.engine == AUTO:
        args.engine = detected
        console.print(
            f"engine auto: the server looks like [bold]{detected}[/bold]"
            + (
                " (auto never picks the sharded mode: pass --engine citus-distributed for it)"
                if detected == "citus"
                else ""
            ),
            highlight=False,
        )
    if problem is not None:
        console.print(f"[red]alkstore conformance: {escape(problem)}[/red]", highlight=False)
        return 2
    try:
        suite = run_suite(args, console)
    except KeyboardInterrupt:
        console.print("[red]interrupted[/red]")
        return 130
    matrix = build_matrix(suite.records.outcomes, parse_drivers(args.driver, args.engine))
    status = exit_status(matrix, suite.status)
    render(matrix, console, _title(args))
    console.print(f"in {suite.seconds:.1f} s")
    skipped = _drivers_not_installed(args)
    if skipped:
        console.print(f"drivers skipped, not installed ({len(skipped)}):", highlight=False)
        for name, install in skipped.items():
            console.print(f"  {name}: {install}", markup=False, highlight=False)
    _explain(status, suite, args, console)
    if args.json is not None:
        document = report_json(args, matrix, suite, status)
        args.json.write_text(json.dumps(document, indent=2) + "\n", encoding="utf-8")
    return status


__all__ = [
    "EXIT_STATUSES",
    "SuiteRun",
    "argument_problem",
    "parse_drivers",
    "probe",
    "pytest_command",
    "pytest_environment",
    "redact",
    "register",
    "report_json",
    "run",
    "run_suite",
    "unreachable",
]
