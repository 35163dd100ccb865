"""The pytest subprocess of ``alkstore conformance``: its command line, environment and progress."""

from __future__ import annotations

import argparse
import importlib.util
import os
import site
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import IO

import attrs
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

import alkstore

from ...conformance.matrix import (
    OUT_OPTION,
    Records,
    parse_record_lines,
    read_records,
)
from .options import (
    PLUGINS,
    SUITE,
    TEST_TIMEOUT,
    parse_drivers,
)


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
