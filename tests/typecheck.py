"""Run ``mypy --strict`` on a snippet of user code, as a user's own CI would."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

MYPY_TIMEOUT = 300
"""Seconds one mypy run may take (a cold cache on a loaded machine)."""


def mypy_errors(tmp_path: Path, snippet: str) -> list[tuple[int, str]]:
    """``(line, message)`` of each error ``mypy --strict`` reports on ``snippet``; an empty
    list means it type-checks."""
    (tmp_path / "snippet.py").write_text(snippet, encoding="utf-8")
    (tmp_path / "mypy.ini").write_text("[mypy]\nstrict = True\n", encoding="utf-8")
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "mypy",
            "--config-file",
            "mypy.ini",
            "--cache-dir",
            str(tmp_path / "cache"),
            "--follow-imports=silent",
            "snippet.py",
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=MYPY_TIMEOUT,
        check=False,
    )
    assert run.returncode in (0, 1), run.stdout + run.stderr  # 2: mypy itself failed
    found = re.findall(r"^snippet\.py:(\d+): error: (.*)$", run.stdout, re.MULTILINE)
    return [(int(line), message) for line, message in found]
