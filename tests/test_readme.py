"""The README's library example runs as written (against its own embedded PostgreSQL)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from tests.conftest import ROOT


def library_example() -> str:
    readme = (ROOT / "README.md").read_text()
    section = readme[readme.index("## Library") :]
    return re.search(r"```python\n(.*?)```", section, re.S).group(1)  # type: ignore[union-attr]


def test_library_example_runs(tmp_path: Path) -> None:
    code = library_example().replace(
        "MemoryStore()", f"MemoryStore(data_dir={str(tmp_path / 'data')!r})", 1
    )
    assert f"data_dir={str(tmp_path / 'data')!r}" in code
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert "Importance must be <= 1.0" in result.stdout
