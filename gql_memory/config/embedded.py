"""The embedded PostgreSQL the server starts when no DATABASE_URL is set: how it is
supervised, restarted and given up on (gql_memory.db.supervision)."""

from __future__ import annotations

from pathlib import Path

from pydantic import Field

# How often the supervisor looks at the postmaster, the server's log and the free space.
EMBEDDED_CHECK_INTERVAL_S = 0.5
# The first wait between two failed restarts; it doubles up to embedded_restart_max_s.
EMBEDDED_RESTART_FIRST_WAIT_S = 0.5
# One restart may take this long (pg_ctl -t): crash recovery replays the WAL first.
EMBEDDED_START_TIMEOUT_S = 60
# A disk with less than this free is full (PostgreSQL's own log may not say so: it is written
# to the same disk). A full disk counts as freed once this much more is free than when it was
# last found full; should writes still fail, the log says so again within a check.
EMBEDDED_DISK_FULL_BYTES = 1024 * 1024


class EmbeddedPostgresSettings:
    """Settings of the embedded PostgreSQL's supervisor (part of ``Settings``)."""

    embedded_restart_max_s: float = Field(
        default=30.0,
        gt=0.0,
        le=600.0,
        description="The embedded PostgreSQL the server started is restarted when it dies: at "
        "once, then after waits doubling from 0.5 s up to this long.",
    )
    embedded_give_up_s: float = Field(
        default=120.0,
        gt=0.0,
        le=86_400.0,
        description="When the embedded PostgreSQL has been down this long despite the "
        "restarts, /healthz answers 503 (liveness fails: an orchestrator restarts the "
        "service); the restarts go on.",
    )
    embedded_state_file: Path | None = Field(
        default=None,
        description="Set by `serve` for its workers: the file where the supervisor of the "
        "embedded PostgreSQL publishes its state (/readyz and /healthz read it).",
    )
