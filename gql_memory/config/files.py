"""The config file named by GQL_MEMORY_CONFIG: read safely (size, encoding, no YAML
aliases) and parsed as TOML or YAML; which keys are settings is checked in ``settings``."""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

import yaml

from gql_memory.errors import ConfigurationError

CONFIG_FILE_ENV = "GQL_MEMORY_CONFIG"
# A config file is a page of settings and rules; anything larger is refused unread, so that a
# wrong path (a log, a dump) or a hostile file cannot make startup parse gigabytes.
MAX_CONFIG_FILE_BYTES = 1024 * 1024


def parse_config_file(path: Path, name: str) -> dict[str, Any]:
    """The settings of a TOML (or, for .yaml/.yml, YAML) config file, keys in lower case.

    A missing, unreadable or oversized file, a syntax error, YAML anchors or aliases and a
    file that holds no mapping raise ConfigurationError naming the file as ``name``.
    """
    text = _config_text(path, name)
    try:
        if path.suffix in (".yaml", ".yml"):
            data = yaml.load(text, Loader=_NoAliasLoader) or {}  # a SafeLoader
        else:
            data = tomllib.loads(text)
    except _AliasRefused as exc:
        line = exc.problem_mark.line + 1 if exc.problem_mark else "?"
        raise ConfigurationError(
            f"{name}: YAML anchors and aliases (&name, *name) are not allowed (line {line})"
        ) from None
    except yaml.MarkedYAMLError as exc:  # its str() spans lines and quotes the source
        where = f" (line {exc.problem_mark.line + 1})" if exc.problem_mark else ""
        raise ConfigurationError(f"{name} is not valid TOML/YAML: {exc.problem}{where}") from None
    except (tomllib.TOMLDecodeError, yaml.YAMLError) as exc:
        raise ConfigurationError(f"{name} is not valid TOML/YAML: {exc}") from None
    except RecursionError:
        raise ConfigurationError(f"{name} is not valid TOML/YAML: nested too deeply") from None
    if not isinstance(data, dict):
        raise ConfigurationError(
            f"{name} must hold settings (key = value), not a {type(data).__name__}"
        )
    return {str(key).lower(): value for key, value in data.items()}


def _config_text(path: Path, name: str) -> str:
    """The file's text, read only up to MAX_CONFIG_FILE_BYTES (so a huge file is not read)."""
    if path.exists() and not path.is_file():
        raise ConfigurationError(f"{name}: not a regular file")
    try:
        with path.open("rb") as file:
            raw = file.read(MAX_CONFIG_FILE_BYTES + 1)
    except FileNotFoundError:
        raise ConfigurationError(f"{name}: no such config file") from None
    except OSError as exc:
        raise ConfigurationError(f"{name}: cannot be read ({exc.strerror or exc})") from None
    if len(raw) > MAX_CONFIG_FILE_BYTES:
        raise ConfigurationError(
            f"{name}: larger than {MAX_CONFIG_FILE_BYTES // 1024**2} MiB, not a config file"
        )
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigurationError(
            f"{name} is not valid TOML/YAML: not UTF-8 (byte {exc.start})"
        ) from None


class _AliasRefused(yaml.composer.ComposerError):
    pass


class _NoAliasLoader(yaml.SafeLoader):
    """A SafeLoader that refuses anchors and aliases: no alias bomb ("billion laughs"), whose
    few hundred bytes expand to billions of list items once validated."""

    def compose_node(self, parent: yaml.Node | None, index: int) -> yaml.Node | None:
        event = self.peek_event()
        if isinstance(event, yaml.AliasEvent) or getattr(event, "anchor", None) is not None:
            raise _AliasRefused(None, None, "anchor or alias", event.start_mark)
        return super().compose_node(parent, index)
