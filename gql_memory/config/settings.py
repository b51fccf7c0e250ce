"""Settings: the one class every part of gql_memory is configured with, and the one place
where the environment and the config file are read (with the precedence between them).

Its fields are declared by area in the modules beside this one (``database``, ``search``,
``server`` ...), each a plain class that ``Settings`` inherits from.
"""

from __future__ import annotations

import difflib
import os
from pathlib import Path
from typing import Any

from pydantic import AliasChoices
from pydantic_settings import (
    BaseSettings,
    InitSettingsSource,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
)

from gql_memory.config.auth import AuthSettings
from gql_memory.config.consolidation import ConsolidationSettings
from gql_memory.config.database import DatabaseSettings
from gql_memory.config.embedded import EmbeddedPostgresSettings
from gql_memory.config.embeddings import EmbeddingProviderSettings, IndexingSettings
from gql_memory.config.extraction import ExtractionSettings
from gql_memory.config.files import CONFIG_FILE_ENV, parse_config_file
from gql_memory.config.graphql import GraphQLSettings, PaginationSettings
from gql_memory.config.live import LiveEventsSettings
from gql_memory.config.observability import LoggingSettings, MetricsSettings
from gql_memory.config.search import SearchSettings
from gql_memory.config.server import ConnectionSettings, ServerSettings
from gql_memory.config.working_memory import WorkingMemorySettings
from gql_memory.errors import ConfigurationError


# pydantic collects the fields of the bases from the last to the first: the areas are listed
# bottom-up so that the settings keep their order (database first, extraction last), the
# order of docs/configuration.md and of every listing of the settings.
class Settings(
    ConsolidationSettings,
    ExtractionSettings,
    IndexingSettings,
    EmbeddingProviderSettings,
    MetricsSettings,
    LiveEventsSettings,
    LoggingSettings,
    ConnectionSettings,
    GraphQLSettings,
    AuthSettings,
    ServerSettings,
    PaginationSettings,
    SearchSettings,
    WorkingMemorySettings,
    EmbeddedPostgresSettings,
    DatabaseSettings,
    BaseSettings,
):
    """Runtime configuration of gql_memory (env vars ``GQL_MEMORY_*`` or the config file)."""

    model_config = SettingsConfigDict(
        env_prefix="GQL_MEMORY_",
        extra="ignore",
        populate_by_name=True,
    )

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        """Precedence: explicit arguments, environment, then the config file (TOML or YAML).

        A config file that is missing, unreadable, malformed or names an unknown setting
        raises ConfigurationError (its message names the file and the problem).
        """
        sources: list[PydanticBaseSettingsSource] = [init_settings, env_settings]
        config_file = os.environ.get(CONFIG_FILE_ENV)
        if config_file:
            sources.append(config_file_source(settings_cls, Path(config_file)))
        return tuple(sources)

    def with_overrides(self, **changes: Any) -> Settings:
        """A copy with some fields changed (validated like the originals)."""
        data = self.model_dump()
        data.update({k: v for k, v in changes.items() if v is not None})
        return Settings.model_validate(data)


def config_file_source(settings_cls: type[BaseSettings], path: Path) -> PydanticBaseSettingsSource:
    """The settings source of the config file named by GQL_MEMORY_CONFIG (TOML or YAML)."""
    data = read_config_file(path, f"{CONFIG_FILE_ENV} {path}", settings_cls)
    return InitSettingsSource(settings_cls, init_kwargs=data)


def read_config_file(
    path: Path, name: str | None = None, settings_cls: type[BaseSettings] = Settings
) -> dict[str, Any]:
    """The settings of a TOML (or, for .yaml/.yml, YAML) config file, keys in lower case.

    Values are not validated yet, but everything else is: a missing, unreadable or oversized
    file, a syntax error, YAML anchors or aliases and an unknown setting raise
    ConfigurationError naming the file as ``name`` (default: the path).
    """
    name = name or str(path)
    settings = parse_config_file(path, name)
    _refuse_unknown_settings(settings, name, settings_cls)
    return settings


def setting_keys(settings_cls: type[BaseSettings]) -> dict[str, str]:
    """Every key a config file may use (lower case) -> the setting it sets."""
    keys = {}
    for field_name, field in settings_cls.model_fields.items():
        keys[field_name] = field_name
        alias = field.validation_alias
        choices = alias.choices if isinstance(alias, AliasChoices) else [alias]
        keys.update({choice.lower(): field_name for choice in choices if isinstance(choice, str)})
    return keys


def _refuse_unknown_settings(
    settings: dict[str, Any], name: str, settings_cls: type[BaseSettings]
) -> None:
    """A misspelt key would otherwise be ignored silently, and its default used instead."""
    known = setting_keys(settings_cls)
    problems = []
    for key in settings:
        if key in known:
            continue
        unprefixed = key.removeprefix(settings_cls.model_config.get("env_prefix", "").lower())
        guesses = [unprefixed] if unprefixed in known else []
        guesses = guesses or difflib.get_close_matches(key, settings_cls.model_fields, n=1)
        hint = f" (did you mean {guesses[0]!r}?)" if guesses else ""
        problems.append(f"unknown setting {key!r}{hint}")
    if problems:
        raise ConfigurationError(f"{name}: " + "; ".join(problems))
