"""Debian packages a test run installs when they are missing (PgBouncer, Chromium).

One ``apt-get`` at a time across the processes of a run (dpkg's own lock would fail the
second installer instead of making it wait), package lists refreshed once when a fresh
container has none, and a clear reason when the package cannot be had.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from collections.abc import Callable
from pathlib import Path

from .cluster import ClusterError, locked_file

APT_TIMEOUT = 900.0
"""Seconds one ``apt-get`` command may take."""


class PackageUnavailable(ClusterError):
    """A program is not installed and cannot be installed here (the message says why)."""


def ensure_program(
    package: str,
    find: Callable[[], Path | None],
    *,
    install: bool = True,
    recommends: bool = False,
) -> Path:
    """The program ``find`` locates, installing Debian's ``package`` first when it is missing.

    ``recommends`` installs the package's recommended packages too (a browser's fonts).
    Raises :class:`PackageUnavailable` when it is missing and ``install`` is false, the
    process is not root, there is no ``apt-get``, or the installation fails.
    """
    found = find()
    if found is not None:
        return found
    if not install:
        raise PackageUnavailable(f"{package} is not installed")
    apt = shutil.which("apt-get")
    if os.geteuid() != 0 or apt is None:
        raise PackageUnavailable(
            f"{package} is not installed, and installing it (apt-get install {package}) "
            "needs root and apt-get"
        )
    with locked_file(Path(tempfile.gettempdir()) / f"alkstore-apt-{package}.lock"):
        found = find()
        if found is not None:
            return found
        env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
        install_cmd = [apt, "install", "-y", "-q", package]
        if not recommends:
            install_cmd.insert(3, "--no-install-recommends")
        for command in (install_cmd, [apt, "update", "-q"], install_cmd):
            result = subprocess.run(
                command, capture_output=True, text=True, timeout=APT_TIMEOUT, env=env
            )
            if command is install_cmd and result.returncode == 0:
                break
        found = find()
    if found is None:
        raise PackageUnavailable(
            f"apt-get install {package} failed ({result.returncode}): "
            f"{(result.stdout + result.stderr).strip()[-500:]}"
        )
    return found


__all__ = ["APT_TIMEOUT", "PackageUnavailable", "ensure_program"]
