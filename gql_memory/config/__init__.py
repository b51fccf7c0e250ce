"""Configuration: every setting, read once (environment and config file), and every constant
of the specification with its meaning, so that behaviour is tuned in one place and never by
bare literals scattered across modules.

``Settings`` (``settings``) is the one pydantic-settings class; its fields are declared by
area, each area's constants beside them:

- ``database``: PostgreSQL, the row-level security role, pool, read replicas, timeouts
- ``embedded``: the embedded PostgreSQL's supervision
- ``working_memory``: capacity, critical items, decay
- ``search``: hybrid search, boosts, relevance, full-text and query limits
- ``graphql``: pagination, the UIs, the limits of one operation
- ``server``: where the server listens, the limits of connections
- ``auth``: API keys and whether requests need one
- ``observability``: logs, metrics, whether OpenTelemetry traces are asked for
- ``live``: live events and subscriptions
- ``embeddings``: the embedding provider, windows, what a stored text is indexed with
- ``extraction``: the extraction pipeline and the redaction gate
- ``context``: context assembly's budget (constants only)
- ``workload``: inline or threaded CPU work, import batches (constants only)
- ``files``: reading the config file; ``messages``: reporting an invalid setting

Every name is re-exported here: importers write ``from gql_memory.config import X``.
"""

from gql_memory.config.auth import API_KEY_DISPLAY_CHARS, API_KEY_PREFIX, API_KEY_RANDOM_BYTES
from gql_memory.config.context import (
    CONTEXT_DEFAULT_MAX_TOKENS,
    CONTEXT_EPISODES_TOP_K,
    CONTEXT_GRAPH_FACTS,
    CONTEXT_GRAPH_SEED_HITS,
    CONTEXT_MAX_TOKENS,
    CONTEXT_MIN_TOKENS,
    CONTEXT_MIN_TRUNCATED_TOKENS,
    CONTEXT_SEARCH_TOP_K,
    CONTEXT_SHARES,
    CONTEXT_TRUNCATION_MARKER,
)
from gql_memory.config.database import DEFAULT_DATABASE_ROLE, NAMESPACE_SETTING
from gql_memory.config.embedded import (
    EMBEDDED_CHECK_INTERVAL_S,
    EMBEDDED_DISK_FULL_BYTES,
    EMBEDDED_RESTART_FIRST_WAIT_S,
    EMBEDDED_START_TIMEOUT_S,
)
from gql_memory.config.embeddings import (
    EMBEDDING_WINDOW_OVERLAP_TOKENS,
    EMBEDDING_WINDOW_TOKENS,
    RAW_CONTEXT_TOKENS,
)
from gql_memory.config.extraction import (
    FIRST_LAST_CHARS,
    GENERIC_TOKEN_MIN_CHARS,
    MATCH_SUMMARY_FILES,
    MATCH_SUMMARY_SAMPLES,
    MAX_RULE_PATTERN_CHARS,
    MAX_TOOL_NAME_CHARS,
    RANDOM_PART_MIN_CHARS,
    RANDOM_TOKEN_MAX_WORDY_SHARE,
    RANDOM_TOKEN_MIN_ENTROPY_BITS,
    RANDOM_TOKEN_SAMPLE_CHARS,
    REDACTION_MARKER,
    STDOUT_HEAD_LINES,
    STDOUT_LINE_CHARS,
    STDOUT_TAIL_LINES,
)
from gql_memory.config.files import CONFIG_FILE_ENV, MAX_CONFIG_FILE_BYTES
from gql_memory.config.live import (
    EVENTS_CHANNEL,
    LISTENER_APPLICATION_NAME,
    LIVE_EVENTS_OPTION,
    NOTIFY_PAYLOAD_MAX_BYTES,
)
from gql_memory.config.messages import invalid_settings_message
from gql_memory.config.observability import OTEL_TRACES_REQUESTED_BY, otel_traces_requested
from gql_memory.config.search import (
    MAX_DATE_RANGE_DAYS,
    MAX_QUERY_CHARS,
    TIME_RANKING_DEPTH,
    TIME_READ_KILL_AFTER_CEILINGS,
    TIME_READ_KILL_AFTER_MIN_S,
    TIME_READ_MAX_CHARS,
    TIME_READ_MAX_NUMBERS,
    TIME_READ_WAIT_MS,
    TIME_READER_NICE,
    TIME_READERS,
    TIME_READING_COST,
    TSV_MAX_CHARS,
)
from gql_memory.config.settings import Settings, config_file_source, read_config_file
from gql_memory.config.workload import IMPORT_BATCH_SIZE, INLINE_CPU_CHARS, INLINE_NEIGHBORS

__all__ = [
    "API_KEY_DISPLAY_CHARS",
    "API_KEY_PREFIX",
    "API_KEY_RANDOM_BYTES",
    "CONFIG_FILE_ENV",
    "CONTEXT_DEFAULT_MAX_TOKENS",
    "CONTEXT_EPISODES_TOP_K",
    "CONTEXT_GRAPH_FACTS",
    "CONTEXT_GRAPH_SEED_HITS",
    "CONTEXT_MAX_TOKENS",
    "CONTEXT_MIN_TOKENS",
    "CONTEXT_MIN_TRUNCATED_TOKENS",
    "CONTEXT_SEARCH_TOP_K",
    "CONTEXT_SHARES",
    "CONTEXT_TRUNCATION_MARKER",
    "DEFAULT_DATABASE_ROLE",
    "EMBEDDED_CHECK_INTERVAL_S",
    "EMBEDDED_DISK_FULL_BYTES",
    "EMBEDDED_RESTART_FIRST_WAIT_S",
    "EMBEDDED_START_TIMEOUT_S",
    "EMBEDDING_WINDOW_OVERLAP_TOKENS",
    "EMBEDDING_WINDOW_TOKENS",
    "EVENTS_CHANNEL",
    "FIRST_LAST_CHARS",
    "GENERIC_TOKEN_MIN_CHARS",
    "IMPORT_BATCH_SIZE",
    "INLINE_CPU_CHARS",
    "INLINE_NEIGHBORS",
    "LISTENER_APPLICATION_NAME",
    "LIVE_EVENTS_OPTION",
    "MATCH_SUMMARY_FILES",
    "MATCH_SUMMARY_SAMPLES",
    "MAX_CONFIG_FILE_BYTES",
    "MAX_DATE_RANGE_DAYS",
    "MAX_QUERY_CHARS",
    "MAX_RULE_PATTERN_CHARS",
    "MAX_TOOL_NAME_CHARS",
    "NAMESPACE_SETTING",
    "NOTIFY_PAYLOAD_MAX_BYTES",
    "OTEL_TRACES_REQUESTED_BY",
    "RANDOM_PART_MIN_CHARS",
    "RANDOM_TOKEN_MAX_WORDY_SHARE",
    "RANDOM_TOKEN_MIN_ENTROPY_BITS",
    "RANDOM_TOKEN_SAMPLE_CHARS",
    "RAW_CONTEXT_TOKENS",
    "REDACTION_MARKER",
    "STDOUT_HEAD_LINES",
    "STDOUT_LINE_CHARS",
    "STDOUT_TAIL_LINES",
    "Settings",
    "TIME_RANKING_DEPTH",
    "TIME_READ_KILL_AFTER_CEILINGS",
    "TIME_READ_KILL_AFTER_MIN_S",
    "TIME_READ_MAX_CHARS",
    "TIME_READ_MAX_NUMBERS",
    "TIME_READ_WAIT_MS",
    "TIME_READER_NICE",
    "TIME_READERS",
    "TIME_READING_COST",
    "TSV_MAX_CHARS",
    "config_file_source",
    "invalid_settings_message",
    "otel_traces_requested",
    "read_config_file",
]
