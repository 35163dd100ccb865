"""Installing alkstore changes nothing in someone else's pytest run: the plugin is opt-in.

Each test builds a throwaway project of a user's in ``tmp_path`` and runs pytest on it in a
subprocess with this interpreter (where alkstore is installed), with none of our pytest
settings or ``PYTEST_*`` variables leaking in.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import alkstore

SUBPROCESS_TIMEOUT = 120
"""Seconds a run of the foreign project's few tests may take before it counts as hung."""


def _run_pytest(project: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("PYTEST_", "ALKSTORE_"))
    }
    # This very copy of alkstore, as the current tests import it.
    root = str(Path(alkstore.__file__).resolve().parents[1])
    env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH")) if p)
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *args],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        timeout=SUBPROCESS_TIMEOUT,
        check=False,
    )


def _project(tmp_path: Path, files: dict[str, str]) -> Path:
    project = tmp_path / "app"
    project.mkdir()
    (project / "pytest.ini").write_text("[pytest]\n", encoding="utf-8")
    for name, text in files.items():
        (project / name).write_text(text, encoding="utf-8")
    return project


def test_a_project_with_its_own_store_fixture_passes_untouched(tmp_path: Path) -> None:
    project = _project(
        tmp_path,
        {
            "conftest.py": (
                "import pytest\n\n@pytest.fixture\ndef store():\n    return {'apples': 3}\n"
            ),
            "test_shop.py": (
                "def test_store_is_ours(store):\n"
                "    assert store == {'apples': 3}\n\n"
                "def test_plain():\n"
                "    assert 1 + 1 == 2\n"
            ),
        },
    )
    run = _run_pytest(project, "-v")
    output = run.stdout + run.stderr
    assert run.returncode == 0, output
    assert "2 passed" in output
    assert "alkstore:" not in output
    assert "alkstore_driver" not in output


def test_asking_for_store_without_defining_one_is_not_satisfied_by_alkstore(
    tmp_path: Path,
) -> None:
    project = _project(
        tmp_path,
        {"test_needs_store.py": "def test_wants_store(store):\n    assert store is not None\n"},
    )
    run = _run_pytest(project)
    output = run.stdout + run.stderr
    assert run.returncode == 1, output
    assert "fixture 'store' not found" in output
    assert "alkstore:" not in output


def test_opting_in_provides_the_prefixed_fixtures(tmp_path: Path) -> None:
    project = _project(tmp_path, {"test_nothing.py": "def test_nothing():\n    pass\n"})
    # ``-p alkstore.conformance`` loads the plugin module through the package's pytest_plugins.
    run = _run_pytest(project, "-p", "alkstore.conformance", "--fixtures")
    output = run.stdout + run.stderr
    assert run.returncode == 0, output
    assert "alkstore: engine=postgres" in output
    fixtures = {line.split()[0] for line in run.stdout.splitlines() if line[:1].isalpha()}
    assert {"alkstore_store", "alkstore_backend"} <= fixtures
    assert "store" not in fixtures
