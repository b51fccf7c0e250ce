"""Prometheus metrics (prometheus-client), one set per app, never import-time globals.

Single process: the metrics live in the app's own registry. With ``PROMETHEUS_MULTIPROC_DIR``
set (uvicorn ``--workers N``), prometheus-client writes every value to per-process files in
that directory and /metrics on any worker adds up all of them; gauges use the ``live*`` modes
so a worker that stopped stops counting.
"""

from __future__ import annotations

import logging
import os
import re
import time
from pathlib import Path
from typing import Any

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
)
from prometheus_client import multiprocess as prometheus_multiprocess
from sqlalchemy import event
from sqlalchemy.ext.asyncio import AsyncEngine

from gql_memory.config import Settings
from gql_memory.embeddings.breaker import EmbedderHealth
from gql_memory.memory.events import MemoryEvent, process_origin

log = logging.getLogger(__name__)

LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30)
DELIVERY_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5)
EMBEDDER_STATES = ("ok", "degraded", "down")
_METRIC_FILE = re.compile(r"_(\d+)\.db$")


class Metrics:
    """Every gql_memory_* metric of one app, plus the hooks that feed them."""

    def __init__(self, settings: Settings) -> None:
        self.multiprocess_dir = settings.prometheus_multiproc_dir
        self.registry = CollectorRegistry()
        r = self.registry
        self.requests = Counter(
            "gql_memory_graphql_requests",
            "GraphQL operations by root field (operation) and type.",
            ["operation", "type"],
            registry=r,
        )
        self.request_seconds = Histogram(
            "gql_memory_graphql_request_duration_seconds",
            "Time to answer a query or mutation (parse, validate, execute).",
            ["operation", "type"],
            buckets=LATENCY_BUCKETS,
            registry=r,
        )
        self.errors = Counter(
            "gql_memory_graphql_errors",
            "GraphQL errors by operation and extensions.code.",
            ["operation", "code"],
            registry=r,
        )
        self.pool_checked_out = Gauge(
            "gql_memory_db_pool_checked_out",
            "Database connections in use right now.",
            multiprocess_mode="livesum",
            registry=r,
        )
        self.pool_size = Gauge(
            "gql_memory_db_pool_size",
            "Configured database pool size (connections kept open).",
            multiprocess_mode="livesum",
            registry=r,
        )
        self.pool_max_overflow = Gauge(
            "gql_memory_db_pool_max_overflow",
            "Extra connections the pool may open beyond its size under load.",
            multiprocess_mode="livesum",
            registry=r,
        )
        self.evictions = Counter(
            "gql_memory_evictions",
            "Working-memory items archived, by reason (LRU_EVICTION, DECAY_EVICTION, "
            "MANUAL_ARCHIVE); counted once, by the process that made the write.",
            ["reason"],
            registry=r,
        )
        self.events = Counter(
            "gql_memory_events_published",
            "Committed memory events (notifications) written by this process, by kind.",
            ["kind"],
            registry=r,
        )
        self.event_delivery_seconds = Histogram(
            "gql_memory_event_delivery_seconds",
            "From an event's write (in its transaction) to its arrival at this process's "
            "listener, across workers and replicas (clocks of replicas must agree).",
            buckets=DELIVERY_BUCKETS,
            registry=r,
        )
        self.embedding_requests = Counter(
            "gql_memory_embedding_requests",
            "Calls to the embedding provider, by provider and outcome (ok, error).",
            ["provider", "outcome"],
            registry=r,
        )
        self.embedding_texts = Counter(
            "gql_memory_embedding_texts",
            "Texts sent to the embedding provider.",
            ["provider"],
            registry=r,
        )
        self.embedding_seconds = Histogram(
            "gql_memory_embedding_duration_seconds",
            "Time per embedding call (a batch of texts), retries included.",
            ["provider"],
            buckets=LATENCY_BUCKETS,
            registry=r,
        )
        self.embedder_state = Gauge(
            "gql_memory_embedder_state",
            "1 for the embedder's state in this process, 0 for the others: ok; degraded (the "
            "last call failed); down (its circuit breaker is open: calls fail at once).",
            ["state"],
            multiprocess_mode="livemax",
            registry=r,
        )
        self.embeddings_waiting = Gauge(
            "gql_memory_embeddings_waiting",
            "Rows (raw turns, insights, episodes) stored while the embedder was down, still "
            "waiting for their vectors, in every namespace (as the last background pass "
            "counted them).",
            ["table"],
            multiprocess_mode="livemax",
            registry=r,
        )
        self.embeddings_backfilled = Counter(
            "gql_memory_embeddings_backfilled",
            "Waiting rows embedded in the background once the embedder was back.",
            ["table"],
            registry=r,
        )
        self.subscriptions = Gauge(
            "gql_memory_subscriptions_active",
            "Open GraphQL subscriptions, by stream (memoryEvents, workingMemoryChanged).",
            ["stream"],
            multiprocess_mode="livesum",
            registry=r,
        )
        self.subscription_overflows = Counter(
            "gql_memory_subscription_overflows",
            "Subscriptions closed because the client fell too far behind.",
            ["stream"],
            registry=r,
        )
        self.listener_connected = Gauge(
            "gql_memory_event_listener_connected",
            "1 while the LISTEN connection is up (multiprocess: the minimum over workers).",
            multiprocess_mode="livemin",
            registry=r,
        )
        self.listener_reconnects = Counter(
            "gql_memory_event_listener_reconnects",
            "Times the LISTEN connection was lost and re-established.",
            registry=r,
        )
        self.apq_documents = Gauge(
            "gql_memory_apq_documents",
            "Automatic persisted queries registered (all namespaces).",
            multiprocess_mode="livesum",
            registry=r,
        )
        self.apq_bytes = Gauge(
            "gql_memory_apq_bytes",
            "Memory the registered automatic persisted queries hold, in bytes "
            "(bounded by GQL_MEMORY_APQ_MAX_BYTES per process).",
            multiprocess_mode="livesum",
            registry=r,
        )
        self.apq_evictions = Counter(
            "gql_memory_apq_evictions",
            "Automatic persisted queries dropped, least recently used first, by the bound "
            "that dropped them: namespace (its documents or bytes) or total (all bytes).",
            ["reason"],
            registry=r,
        )
        self.admission_waiting = Gauge(
            "gql_memory_admission_waiting",
            "GraphQL requests waiting for a slot (GQL_MEMORY_ADMISSION_SLOTS), all namespaces.",
            multiprocess_mode="livesum",
            registry=r,
        )
        self.admission_wait_seconds = Histogram(
            "gql_memory_admission_wait_seconds",
            "Time a GraphQL request waited for its slot (0 when one was free).",
            buckets=LATENCY_BUCKETS,
            registry=r,
        )
        self.admission_refusals = Counter(
            "gql_memory_admission_refusals",
            "Requests answered RATE_LIMITED without running: queue_full (the namespace had "
            "GQL_MEMORY_ADMISSION_QUEUE waiting) or deadline (still waiting at its deadline).",
            ["reason"],
            registry=r,
        )

        # read replicas (GQL_MEMORY_READ_DATABASE_URL); none of these appear without them
        self.server_up = Gauge(
            "gql_memory_database_up",
            "1 while the last check reached the server (primary, or a replica that is a "
            "standby); only with read replicas configured.",
            ["server"],
            multiprocess_mode="livemin",
            registry=r,
        )
        self.replica_lag = Gauge(
            "gql_memory_replica_lag_seconds",
            "How long ago the primary had written what the replica has not replayed yet.",
            ["server"],
            multiprocess_mode="livemax",
            registry=r,
        )
        self.reads = Counter(
            "gql_memory_db_reads",
            "Read transactions by the server that ran them (primary or a replica); only with "
            "read replicas configured.",
            ["server"],
            registry=r,
        )
        self.read_fallbacks = Counter(
            "gql_memory_replica_fallbacks",
            "Reads sent to the primary because no replica could serve them: unavailable "
            "(down), lagging (beyond GQL_MEMORY_REPLICA_MAX_LAG_S), lsn_timeout (the requested "
            "position was not replayed within GQL_MEMORY_READ_AFTER_LSN_WAIT_S).",
            ["reason"],
            registry=r,
        )
        self.read_waits = Counter(
            "gql_memory_replica_lsn_waits",
            "Reads that waited for a replica to replay a requested commit position.",
            ["server"],
            registry=r,
        )

    # --- exposition ----------------------------------------------------------------------

    def exposition(self) -> tuple[bytes, str]:
        """(body, content type) in the Prometheus text format."""
        if self.multiprocess_dir is None:
            return generate_latest(self.registry), CONTENT_TYPE_LATEST
        registry = CollectorRegistry()
        prometheus_multiprocess.MultiProcessCollector(registry, path=str(self.multiprocess_dir))
        return generate_latest(registry), CONTENT_TYPE_LATEST

    def process_exited(self) -> None:
        """Drop this process's live gauges (graceful shutdown in multiprocess mode)."""
        if self.multiprocess_dir is not None:
            prometheus_multiprocess.mark_process_dead(os.getpid(), str(self.multiprocess_dir))

    # --- database pool -------------------------------------------------------------------

    def instrument_pool(self, engine: AsyncEngine, settings: Settings) -> None:
        """Follow the engine's pool: +1 on checkout, -1 on checkin."""
        self.pool_size.set(settings.db_pool_size)
        self.pool_max_overflow.set(settings.db_max_overflow)
        self.pool_checked_out.set(0)

        def checkout(*_: Any) -> None:
            self.pool_checked_out.inc()

        def checkin(*_: Any) -> None:
            self.pool_checked_out.dec()

        event.listen(engine.sync_engine, "checkout", checkout)
        event.listen(engine.sync_engine, "checkin", checkin)

    # --- ReplicaObserver (gql_memory.db.replicas) ----------------------------------------

    def server_checked(self, server: str, up: bool, lag_s: float | None) -> None:
        self.server_up.labels(server).set(1 if up else 0)
        if lag_s is not None:
            self.replica_lag.labels(server).set(lag_s)

    def read_served(self, server: str) -> None:
        self.reads.labels(server).inc()

    def read_fell_back(self, reason: str) -> None:
        self.read_fallbacks.labels(reason).inc()

    def read_waited(self, server: str) -> None:
        self.read_waits.labels(server).inc()

    # --- embeddings ----------------------------------------------------------------------

    def embedding_call(self, provider: str, texts: int, seconds: float, ok: bool) -> None:
        self.embedding_requests.labels(provider, "ok" if ok else "error").inc()
        self.embedding_texts.labels(provider).inc(texts)
        self.embedding_seconds.labels(provider).observe(seconds)

    def embedder_changed(self, health: EmbedderHealth) -> None:
        for state in EMBEDDER_STATES:
            self.embedder_state.labels(state).set(1 if state == health.state else 0)

    def backfill_pass(self, embedded: dict[str, int], waiting: dict[str, int]) -> None:
        for table, count in embedded.items():
            if count:
                self.embeddings_backfilled.labels(table).inc(count)
        for table, count in waiting.items():
            self.embeddings_waiting.labels(table).set(count)

    # --- ApqObserver (gql_memory.api.persisted) ------------------------------------------

    def apq_cache_changed(self, documents: int, size_bytes: int) -> None:
        self.apq_documents.set(documents)
        self.apq_bytes.set(size_bytes)

    def apq_evicted(self, reason: str, documents: int) -> None:
        self.apq_evictions.labels(reason).inc(documents)

    # --- AdmissionObserver (gql_memory.server.admission) ---------------------------------

    def admission_queue_changed(self, waiting: int) -> None:
        self.admission_waiting.set(waiting)

    def admission_waited(self, seconds: float) -> None:
        self.admission_wait_seconds.observe(seconds)

    def admission_refused(self, reason: str) -> None:
        self.admission_refusals.labels(reason).inc()

    # --- HubObserver / ListenerObserver --------------------------------------------------

    def subscription_opened(self, stream: str) -> None:
        self.subscriptions.labels(stream).inc()

    def subscription_closed(self, stream: str) -> None:
        self.subscriptions.labels(stream).dec()

    def subscriber_overflowed(self, stream: str) -> None:
        self.subscription_overflows.labels(stream).inc()

    def event_received(self, memory_event: MemoryEvent) -> None:
        """Every process receives every event; only the writer's process counts it."""
        delay = time.time() - memory_event.occurred_at.timestamp()
        self.event_delivery_seconds.observe(max(delay, 0.0))
        if memory_event.origin != process_origin():
            return
        self.events.labels(memory_event.kind.value).inc()
        reason = memory_event.archive_reason
        if reason is not None:
            self.evictions.labels(reason).inc(len(memory_event.ids))

    def listener_connection_changed(self, connected: bool) -> None:
        self.listener_connected.set(1 if connected else 0)

    def listener_reconnected(self) -> None:
        self.listener_reconnects.inc()


def prepare_multiprocess_dir(path: Path) -> None:
    """Create the directory and delete metric files left by processes that no longer run.

    prometheus-client asks for a clean directory per run; removing only dead processes'
    files also keeps it safe when several servers on one host share the directory.
    """
    path.mkdir(parents=True, exist_ok=True)
    for file in path.glob("*.db"):
        match = _METRIC_FILE.search(file.name)
        if match and not _process_alive(int(match.group(1))):
            file.unlink(missing_ok=True)


def _process_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # alive, owned by someone else
        return True
    return True
