"""The README's library example runs as written (against its own embedded PostgreSQL)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path
from typing import Any

from gql_memory.config import Settings
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


def environment_name(name: str, field: Any) -> str:
    """The variable a setting is read from: its alias if it has one, else GQL_MEMORY_<NAME>."""
    alias = field.validation_alias
    if alias is not None:
        return str(alias.choices[0])
    return f"GQL_MEMORY_{name.upper()}"


def test_every_setting_is_documented() -> None:
    readme = (ROOT / "README.md").read_text()
    missing = [
        environment_name(name, field)
        for name, field in Settings.model_fields.items()
        if f"`{environment_name(name, field)}`" not in readme
    ]
    assert not missing, f"settings the README does not document: {missing}"
