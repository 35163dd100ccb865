"""The documentation stays true: its Python examples run, and its capability matrix is current."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from alkstore.engines.capability_matrix import embed
from databases import scratch_database

ROOT = Path(__file__).resolve().parents[1]
DOC_DSN = "postgresql://postgres@localhost/app"
PAGES = [
    "README.md",
    "docs/guide.md",
    "docs/tasks.md",
    "docs/drivers.md",
    "docs/workers.md",
    "docs/dashboard.md",
    "docs/observability.md",
    "docs/queues.md",
    "docs/deployment.md",
    "docs/frameworks.md",
]
BLOCK = re.compile(r"```python\n(.*?)```", re.DOTALL)
EXCERPT = re.compile(r"# excerpt of (examples/\S+)\n")
"""The first line of a block that quotes a file of examples/ (a Django project cannot run in
this process): checked to be in that file, whose own tests run it, instead of executed."""


def _blocks() -> list[tuple[str, str]]:
    return [
        (f"{page}#{index + 1}", code)
        for page in PAGES
        for index, code in enumerate(BLOCK.findall((ROOT / page).read_text()))
    ]


def _examples() -> list[tuple[str, str]]:
    return [(name, code) for name, code in _blocks() if not EXCERPT.match(code)]


def _excerpts() -> list[tuple[str, str]]:
    return [(name, code) for name, code in _blocks() if EXCERPT.match(code)]


def test_every_page_has_examples():
    assert {name.split("#")[0] for name, _ in _examples()} == set(PAGES)


@pytest.mark.parametrize(("name", "code"), _examples(), ids=[n for n, _ in _examples()])
def test_python_examples_run(name, code, pg_dsn):
    assert DOC_DSN in code, f"{name} should use {DOC_DSN}"
    with scratch_database(pg_dsn, "docs") as dsn:
        exec(compile(code.replace(DOC_DSN, dsn), name, "exec"), {"__name__": "__docs__"})


@pytest.mark.parametrize(("name", "code"), _excerpts(), ids=[n for n, _ in _excerpts()])
def test_excerpts_quote_the_examples_as_they_are(name, code):
    found = EXCERPT.match(code)
    assert found is not None
    quoted = code[found.end() :]
    assert quoted in (ROOT / found.group(1)).read_text(), f"{name} is not in {found.group(1)}"


def test_the_readme_example_runs_twice_on_one_database(pg_dsn):
    # Its create_queue has exist_ok=True: a second run accepts the queue of the first.
    name, code = _examples()[0]
    assert name == "README.md#1"
    with scratch_database(pg_dsn, "docs") as dsn:
        for _ in range(2):
            exec(compile(code.replace(DOC_DSN, dsn), name, "exec"), {"__name__": "__docs__"})


def test_capability_matrix_page_matches_the_engines():
    page = (ROOT / "docs/engines.md").read_text()
    assert embed(page) == page, "run: python -m alkstore.engines.capability_matrix"


MEMORY_PAGES = ["docs/testing.md"]
"""Pages whose examples run on the in-memory engine (``memory://``): no server needed."""


def _memory_examples() -> list[tuple[str, str]]:
    return [
        (f"{page}#{index + 1}", code)
        for page in MEMORY_PAGES
        for index, code in enumerate(BLOCK.findall((ROOT / page).read_text()))
    ]


@pytest.mark.parametrize(
    ("name", "code"), _memory_examples(), ids=[n for n, _ in _memory_examples()]
)
def test_in_memory_examples_run(name, code):
    assert "memory://" in code and DOC_DSN not in code, f"{name} should use memory://"
    exec(compile(code, name, "exec"), {"__name__": "__docs__"})
