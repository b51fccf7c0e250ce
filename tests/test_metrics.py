"""Multiprocess metrics housekeeping: files of dead workers go, live workers' files stay."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from gql_memory.server.metrics import prepare_multiprocess_dir


def test_preparing_the_directory_removes_only_dead_processes_files(tmp_path: Path) -> None:
    child = subprocess.Popen(["true"])
    child.wait()  # exited and reaped: its pid no longer runs
    dead_pid = child.pid
    directory = tmp_path / "metrics"
    directory.mkdir()
    for name in (f"counter_{dead_pid}.db", f"gauge_livesum_{dead_pid}.db"):
        (directory / name).write_bytes(b"")
    mine = directory / f"counter_{os.getpid()}.db"
    mine.write_bytes(b"")
    prepare_multiprocess_dir(directory)
    assert sorted(p.name for p in directory.iterdir()) == [mine.name]


def test_preparing_creates_a_missing_directory(tmp_path: Path) -> None:
    prepare_multiprocess_dir(tmp_path / "new" / "metrics")
    assert (tmp_path / "new" / "metrics").is_dir()
