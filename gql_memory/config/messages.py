"""How an invalid setting is reported: one line naming the setting, where it was set
(environment variable, config file or command line), its value with credentials masked,
and what is allowed."""

from __future__ import annotations

import os
import re

from pydantic import AliasChoices
from pydantic import ValidationError as PydanticValidationError

from gql_memory.config.files import CONFIG_FILE_ENV
from gql_memory.config.settings import Settings, setting_keys

# Settings whose values may carry credentials: an error shows them masked.
_SECRET_SETTINGS = frozenset(
    {
        "database_url",
        "app_database_url",
        "read_database_url",
        "openai_api_key",
        "consolidation_llm_api_key",
    }
)
_SHOWN_VALUE_CHARS = 80


def invalid_settings_message(
    exc: PydanticValidationError, *, from_command_line: bool = False
) -> str:
    """One line naming the first invalid setting, where it was set, its value and what is
    allowed: ``working_memory_capacity (GQL_MEMORY_CONFIG a.toml): -3 is invalid: it should
    be greater than or equal to 1``."""
    errors = exc.errors(include_url=False)
    first = errors[0]
    loc = [str(part) for part in first["loc"]]
    field_name = setting_keys(Settings).get(loc[0].lower(), loc[0]) if loc else ""
    setting = ".".join([field_name, *loc[1:]]) or "settings"
    source = " (command line)" if from_command_line else _where_set(field_name)
    message = first["msg"].removeprefix("Value error, ")
    if message.startswith("Input should"):
        message = "it should" + message.removeprefix("Input should")
    line = f"{setting}{source}: {_shown_value(field_name, first.get('input'))} is invalid: "
    more = f" (and {len(errors) - 1} more invalid)" if len(errors) > 1 else ""
    return line + message + more


def _where_set(field_name: str) -> str:
    """Where a setting's value came from: its environment variable or the config file."""
    field = Settings.model_fields.get(field_name)
    if field is None:
        return ""
    alias = field.validation_alias
    if isinstance(alias, AliasChoices):
        names = [choice for choice in alias.choices if isinstance(choice, str)]
    else:
        names = [f"GQL_MEMORY_{field_name}"]
    set_in_env = {variable.upper() for variable in os.environ}
    for variable in names:
        if variable.upper() in set_in_env:
            return f" ({variable.upper()})"
    if config_file := os.environ.get(CONFIG_FILE_ENV):
        return f" ({CONFIG_FILE_ENV} {config_file})"
    return ""


def _shown_value(field_name: str, value: object) -> str:
    """The offending value as the operator wrote it, credentials masked, long values cut."""
    shown = repr(value)
    if field_name in _SECRET_SETTINGS:
        shown = re.sub(r"(://[^:/@]*:)[^@/]*@", r"\1***@", shown)
        shown = shown if "url" in field_name else "'***'"
    if len(shown) > _SHOWN_VALUE_CHARS:
        shown = shown[: _SHOWN_VALUE_CHARS - 1] + "…"
    return shown
