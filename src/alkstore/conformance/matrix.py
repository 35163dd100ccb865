"""The conformance matrix: test outcomes by area and driver, every skip's reason, every failure.

Two halves meet through a file of JSON lines:

- In the pytest run, this module is a plugin (``-p alkstore.conformance.matrix``): with
  ``--alkstore-matrix-out FILE`` it appends one line per finished test (its area, driver,
  outcome, one-line message and the capabilities it lacked) to FILE, as the run goes.
- In the ``alkstore conformance`` command, :func:`read_records` turns that file back into
  :class:`TestOutcome` values, :func:`build_matrix` counts them into a :class:`Matrix`, and
  :func:`render` prints it with rich (:meth:`Matrix.to_json` gives the same as JSON).

An area is a suite module's name without ``test_`` (``queues``, ``send``, ...); a driver is
the ``alkstore_driver`` parameter the plugin runs each test with (``-`` for a test that does
not use the ``store`` fixture). A test's outcome folds its setup, call and teardown: failed if
any phase failed (errors count as failures), skipped if setup or call skipped (an expected
failure counts as a skip, with its reason), else passed. pytest itself is only needed inside
the pytest run: this module imports it for type checking only.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, Literal

import attrs
from rich.console import Console, RenderableType
from rich.padding import Padding
from rich.table import Table
from rich.text import Text

if TYPE_CHECKING:
    import pytest

Outcome = Literal["passed", "failed", "skipped"]
"""A test's outcome as the matrix counts it (errors are failures, expected failures skips)."""

OUT_OPTION = "--alkstore-matrix-out"
"""The pytest option naming the JSON-lines file the plugin writes."""

AREA_ORDER = (
    "queues",
    "send",
    "lifecycle",
    "retries",
    "maintenance",
    "delivery",
    "schema",
    "worker",
    "cron",
    "pubsub",
    "model_stateful",
)
"""Areas in the order the matrix lists them; others follow alphabetically."""

DRIVER_ORDER = ("psycopg", "psycopg-async", "asyncpg", "pg8000")
"""Drivers in the order the matrix lists them; others (and ``-``) follow."""

NO_DRIVER = "-"
"""The driver column of a test that does not run per driver."""

COLLECTION = "(collection)"
"""The area of a module that failed to import or collect."""

MESSAGE_LIMIT = 300
"""Characters kept of a one-line message."""


# --- outcomes ---------------------------------------------------------------------------------


@attrs.frozen
class TestOutcome:
    """The outcome of one test (or one failed collection) as the matrix counts it."""

    __test__ = False  # not a test class, whatever pytest thinks of the name

    nodeid: str
    area: str
    driver: str
    outcome: Outcome
    phase: str = "call"
    """The phase that decided the outcome: setup, call, teardown or collect."""
    message: str = ""
    """The skip reason, or the failure's one-line message."""
    capabilities: tuple[str, ...] = ()
    """For a skip: the ``requires`` capabilities the engine lacks."""

    def to_json(self) -> dict[str, Any]:
        """The outcome as a JSON object."""
        return {
            "test": self.nodeid,
            "area": self.area,
            "driver": self.driver,
            "outcome": self.outcome,
            "phase": self.phase,
            "message": self.message,
            "capabilities": list(self.capabilities),
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> TestOutcome:
        """The inverse of :meth:`to_json`."""
        outcome = data["outcome"]
        if outcome not in ("passed", "failed", "skipped"):
            raise ValueError(f"unknown outcome {outcome!r}")
        return cls(
            nodeid=str(data["test"]),
            area=str(data["area"]),
            driver=str(data["driver"]),
            outcome=outcome,
            phase=str(data.get("phase", "call")),
            message=str(data.get("message", "")),
            capabilities=tuple(str(c) for c in data.get("capabilities", ())),
        )


def one_line(text: str) -> str:
    """The first non-blank line of ``text``, stripped and cut to :data:`MESSAGE_LIMIT`."""
    line = next((line.strip() for line in text.splitlines() if line.strip()), "")
    return line if len(line) <= MESSAGE_LIMIT else line[: MESSAGE_LIMIT - 1] + "…"


def report_message(report: pytest.TestReport | pytest.CollectReport) -> str:
    """A report's one-line message: the skip reason, or the exception line of a failure."""
    longrepr = report.longrepr
    if isinstance(longrepr, tuple) and len(longrepr) == 3:  # a skip: (path, line, reason)
        return one_line(str(longrepr[2]).removeprefix("Skipped: "))
    crash = getattr(longrepr, "reprcrash", None)
    message = getattr(crash, "message", None)
    if isinstance(message, str) and message.strip():
        return one_line(message)
    return one_line(report.longreprtext)


def fold_reports(
    reports: Sequence[pytest.TestReport],
) -> tuple[Outcome, str, str]:
    """A test's outcome, deciding phase and message from its phase reports, in order."""
    for report in reports:
        if report.failed:
            return "failed", report.when or "call", report_message(report)
    for report in reports:
        if report.skipped:
            xfail = getattr(report, "wasxfail", None)
            if xfail is not None:
                return "skipped", report.when or "call", one_line(f"xfail: {xfail}")
            return "skipped", report.when or "call", report_message(report)
    return "passed", "call", ""


def outcome_of(
    nodeid: str,
    area: str,
    driver: str,
    reports: Sequence[pytest.TestReport],
    requires: Sequence[str] = (),
    lacking: Sequence[str] | None = None,
) -> TestOutcome:
    """Fold one test's reports into a :class:`TestOutcome`.

    ``requires`` are the test's ``requires`` marker capabilities, ``lacking`` those the
    engine does not have (all of ``requires`` when None); a skip names the lacking ones.
    """
    outcome, phase, message = fold_reports(reports)
    missing = tuple(requires if lacking is None else lacking) if outcome == "skipped" else ()
    return TestOutcome(nodeid, area, driver, outcome, phase, message, missing)


# --- the pytest plugin ------------------------------------------------------------------------


def area_of(module_name: str) -> str:
    """The area of a suite module: its last dotted part without the ``test_`` prefix."""
    return module_name.rsplit(".", 1)[-1].removeprefix("test_")


def pytest_addoption(parser: pytest.Parser) -> None:
    """Register ``--alkstore-matrix-out``."""
    parser.getgroup("alkstore").addoption(
        OUT_OPTION,
        default=None,
        metavar="FILE",
        help="append one JSON line per test outcome to FILE (for alkstore conformance)",
    )


def pytest_configure(config: pytest.Config) -> None:
    """Start recording when ``--alkstore-matrix-out`` is given."""
    path = config.getoption(OUT_OPTION)
    if path:
        engine = config.getoption("--alkstore-engine", default="postgres")
        config.pluginmanager.register(Recorder(Path(path), str(engine)), "alkstore-matrix")


class Recorder:
    """The plugin object that writes one JSON line per finished test (and failed collection).

    Lines are flushed as they are written, so a reader sees the run progress and a crashed
    run leaves what it finished. The first record of a run is ``{"kind": "collected",
    "count": N}``; test outcomes are ``{"kind": "test", ...}`` (see :meth:`TestOutcome.to_json`).
    """

    def __init__(self, path: Path, engine: str) -> None:
        self._file: IO[str] = path.open("a", encoding="utf-8")
        self._engine = engine
        self._items: dict[str, tuple[str, str, tuple[str, ...]]] = {}
        self._reports: dict[str, list[pytest.TestReport]] = {}

    def _write(self, record: Mapping[str, Any]) -> None:
        self._file.write(json.dumps(record) + "\n")
        self._file.flush()

    def _lacking(self, requires: Sequence[str]) -> list[str]:
        from ..engines import engine_class

        try:
            caps = engine_class(self._engine).description.capabilities
        except Exception:  # an unknown engine: every test errors anyway
            return list(requires)
        return [name for name in requires if not getattr(caps, name, False)]

    def pytest_collectreport(self, report: pytest.CollectReport) -> None:
        """Record a module that could not be collected."""
        if report.failed:
            outcome = TestOutcome(
                report.nodeid, COLLECTION, NO_DRIVER, "failed", "collect", report_message(report)
            )
            self._write({"kind": "test", **outcome.to_json()})

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        """Remember each selected test's area, driver and required capabilities."""
        for item in session.items:
            module = getattr(item, "module", None)
            area = area_of(module.__name__) if module is not None else area_of(item.path.stem)
            callspec = getattr(item, "callspec", None)
            driver = (
                str(callspec.params.get("alkstore_driver", NO_DRIVER)) if callspec else NO_DRIVER
            )
            marker = item.get_closest_marker("requires")
            requires = tuple(str(arg) for arg in marker.args) if marker is not None else ()
            self._items[item.nodeid] = (area, driver, requires)
        self._write({"kind": "collected", "count": len(session.items)})

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        """Collect the phase reports of the running test."""
        self._reports.setdefault(report.nodeid, []).append(report)

    def pytest_runtest_logfinish(self, nodeid: str, location: tuple[str, int | None, str]) -> None:
        """Write the finished test's outcome."""
        reports = self._reports.pop(nodeid, [])
        fallback = (area_of(Path(location[0]).stem), NO_DRIVER, ())
        area, driver, requires = self._items.get(nodeid, fallback)
        lacking = self._lacking(requires) if requires else []
        outcome = outcome_of(nodeid, area, driver, reports, requires, lacking)
        self._write({"kind": "test", **outcome.to_json()})

    def pytest_unconfigure(self, config: pytest.Config) -> None:
        """Close the file."""
        self._file.close()


# --- reading and counting ---------------------------------------------------------------------


@attrs.frozen
class Records:
    """What a recorded run produced: the outcomes, and how many tests it had collected."""

    outcomes: list[TestOutcome]
    collected: int | None
    """None when the run never finished collecting."""


def parse_record_lines(lines: Iterable[str]) -> Records:
    """Parse JSON lines written by :class:`Recorder` (a torn last line is ignored)."""
    outcomes: list[TestOutcome] = []
    collected: int | None = None
    for line in lines:
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
            continue
        if record.get("kind") == "collected":
            collected = int(record["count"])
        elif record.get("kind") == "test":
            outcomes.append(TestOutcome.from_json(record))
    return Records(outcomes, collected)


def read_records(path: Path) -> Records:
    """Read the file a :class:`Recorder` wrote (empty when it does not exist)."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return Records([], None)
    return parse_record_lines(text.splitlines())


@attrs.define
class Counts:
    """Passed, failed and skipped tests of one cell (or row, or the whole run)."""

    passed: int = 0
    failed: int = 0
    skipped: int = 0

    @property
    def total(self) -> int:
        """Every test counted."""
        return self.passed + self.failed + self.skipped

    def add(self, outcome: Outcome) -> None:
        """Count one more test with ``outcome``."""
        setattr(self, outcome, getattr(self, outcome) + 1)

    def to_json(self) -> dict[str, int]:
        """The counts as a JSON object."""
        return {"passed": self.passed, "failed": self.failed, "skipped": self.skipped}


def _ordered(names: Iterable[str], preferred: Sequence[str]) -> list[str]:
    rank = {name: i for i, name in enumerate(preferred)}
    return sorted(set(names), key=lambda n: (rank.get(n, len(rank)), n == NO_DRIVER, n))


@attrs.frozen
class Matrix:
    """Test outcomes counted by area (rows) and driver (columns), with the skips and failures."""

    areas: list[str]
    drivers: list[str]
    cells: dict[tuple[str, str], Counts]
    skips: list[TestOutcome]
    failures: list[TestOutcome]

    def cell(self, area: str, driver: str) -> Counts:
        """The counts of one area through one driver (zeros where nothing ran)."""
        return self.cells.get((area, driver), Counts())

    def row(self, area: str) -> Counts:
        """The counts of one area over every driver."""
        return _sum(self.cell(area, driver) for driver in self.drivers)

    def column(self, driver: str) -> Counts:
        """The counts of one driver over every area."""
        return _sum(self.cell(area, driver) for area in self.areas)

    @property
    def totals(self) -> Counts:
        """The counts of the whole run."""
        return _sum(self.cells.values())

    def to_json(self) -> dict[str, Any]:
        """The matrix as JSON: ``matrix[area][driver]`` counts, totals, skips and failures."""
        return {
            "areas": self.areas,
            "drivers": self.drivers,
            "matrix": {
                area: {driver: self.cell(area, driver).to_json() for driver in self.drivers}
                for area in self.areas
            },
            "totals": self.totals.to_json(),
            "skips": [
                {
                    "test": s.nodeid,
                    "area": s.area,
                    "driver": s.driver,
                    "capabilities": list(s.capabilities),
                    "reason": s.message,
                }
                for s in self.skips
            ],
            "failures": [
                {
                    "test": f.nodeid,
                    "area": f.area,
                    "driver": f.driver,
                    "phase": f.phase,
                    "message": f.message,
                }
                for f in self.failures
            ],
        }


def _sum(counts: Iterable[Counts]) -> Counts:
    total = Counts()
    for c in counts:
        total.passed += c.passed
        total.failed += c.failed
        total.skipped += c.skipped
    return total


def build_matrix(outcomes: Iterable[TestOutcome], drivers: Sequence[str] = ()) -> Matrix:
    """Count ``outcomes`` into a :class:`Matrix`; ``drivers`` are columns shown even if empty."""
    cells: dict[tuple[str, str], Counts] = {}
    skips: list[TestOutcome] = []
    failures: list[TestOutcome] = []
    for outcome in outcomes:
        cells.setdefault((outcome.area, outcome.driver), Counts()).add(outcome.outcome)
        if outcome.outcome == "skipped":
            skips.append(outcome)
        elif outcome.outcome == "failed":
            failures.append(outcome)
    areas = _ordered((area for area, _ in cells), AREA_ORDER)
    columns = _ordered([*drivers, *(driver for _, driver in cells)], DRIVER_ORDER)
    area_rank = {area: i for i, area in enumerate(areas)}
    driver_rank = {driver: i for i, driver in enumerate(columns)}

    def order(outcome: TestOutcome) -> tuple[int, str, int, str]:
        test = outcome.nodeid.split("[", 1)[0]
        return area_rank[outcome.area], test, driver_rank[outcome.driver], outcome.nodeid

    return Matrix(areas, columns, cells, sorted(skips, key=order), sorted(failures, key=order))


def exit_status(matrix: Matrix, pytest_status: int) -> int:
    """The command's exit status for a run: 0 when every test passed or was skipped.

    1 on any failure (or when pytest reports failures the matrix did not see), 2 when the run
    did not get to its end (pytest interrupted, internal or usage error, or killed), 5 when no
    test ran (pytest's own code for an empty selection).
    """
    if matrix.failures or pytest_status == 1:
        return 1
    if pytest_status not in (0, 5):
        return 2
    if matrix.totals.total == 0:
        return 5
    return 0


# --- rendering --------------------------------------------------------------------------------


def _cell_text(counts: Counts) -> Text:
    if counts.total == 0:
        return Text("·", style="dim")
    style = "red" if counts.failed else "green" if counts.passed else "yellow"
    return Text(f"{counts.passed} / {counts.failed} / {counts.skipped}", style=style)


def matrix_table(matrix: Matrix) -> Table:
    """The rich table: one row per area, one column per driver (and a total column when
    there are several), then a total row."""
    several = len(matrix.drivers) > 1
    table = Table(caption="passed / failed / skipped", show_footer=True)
    table.add_column("area", footer="total")
    for driver in matrix.drivers:
        table.add_column(driver, justify="right", footer=_cell_text(matrix.column(driver)))
    if several:
        table.add_column("total", justify="right", footer=_cell_text(matrix.totals))
    for area in matrix.areas:
        cells = [_cell_text(matrix.cell(area, driver)) for driver in matrix.drivers]
        table.add_row(area, *cells, *([_cell_text(matrix.row(area))] if several else []))
    return table


def _item(head: str, detail: str, style: str) -> list[RenderableType]:
    return [
        Padding(Text(head), (0, 0, 0, 2), expand=False),
        Padding(Text(detail, style=style), (0, 0, 0, 4), expand=False),
    ]


def skip_lines(matrix: Matrix) -> list[RenderableType]:
    """Every skipped test, then the capabilities it lacked (if any) and the reason, indented."""
    lines: list[RenderableType] = [Text(f"skipped ({len(matrix.skips)}):", style="bold yellow")]
    for skip in matrix.skips:
        capability = ", ".join(skip.capabilities)
        detail = f"capability {capability}: {skip.message}" if capability else skip.message
        lines += _item(skip.nodeid, detail, "yellow")
    return lines


def failure_lines(matrix: Matrix) -> list[RenderableType]:
    """Every failed test with the phase that failed, then its one-line message, indented."""
    lines: list[RenderableType] = [Text(f"failed ({len(matrix.failures)}):", style="bold red")]
    for failure in matrix.failures:
        lines += _item(f"{failure.nodeid} ({failure.phase})", failure.message, "red")
    return lines


def render(matrix: Matrix, console: Console, title: str = "conformance") -> None:
    """Print the title and the matrix, then the skips and the failures (where there are any).

    Only the title and the totals line when no test ran.
    """
    console.print(Text(title, style="bold"))
    if matrix.totals.total:
        console.print(matrix_table(matrix))
    if matrix.skips:
        console.print(*skip_lines(matrix), sep="\n")
    if matrix.failures:
        console.print(*failure_lines(matrix), sep="\n")
    totals = matrix.totals
    style = "red" if totals.failed else "green"
    console.print(
        f"[{style}]{totals.passed} passed, {totals.failed} failed, "
        f"{totals.skipped} skipped[/{style}]"
    )


__all__ = [
    "AREA_ORDER",
    "COLLECTION",
    "DRIVER_ORDER",
    "NO_DRIVER",
    "OUT_OPTION",
    "Counts",
    "Matrix",
    "Recorder",
    "Records",
    "TestOutcome",
    "area_of",
    "build_matrix",
    "exit_status",
    "failure_lines",
    "fold_reports",
    "matrix_table",
    "one_line",
    "outcome_of",
    "parse_record_lines",
    "read_records",
    "render",
    "report_message",
    "skip_lines",
]
