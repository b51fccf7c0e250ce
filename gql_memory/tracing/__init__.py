"""OpenTelemetry tracing: GenAI memory spans for every library call, GraphQL operation and
MCP tool call, with embedding calls and database statements as their children.

On only when the ``otel`` extra is installed (``pip install 'gql-memory[otel]'``: the SDK
and the OTLP/HTTP exporter) and the environment asks for traces (OTEL_EXPORTER_OTLP_ENDPOINT
or OTEL_TRACES_EXPORTER, config.otel_traces_requested); never otherwise. Off, ``tracing_for``
returns None, no hook is installed and no OpenTelemetry module beyond this package's import
is loaded. The rest of the configuration is the SDK's own standard variables
(OTEL_EXPORTER_OTLP_PROTOCOL, OTEL_SERVICE_NAME, OTEL_TRACES_SAMPLER, OTEL_BSP_*, ...).
docs/observability.md.
"""

from __future__ import annotations

import importlib.util
import logging
import os
import threading
from typing import TYPE_CHECKING, Any

from gql_memory.config import Settings, otel_traces_requested

if TYPE_CHECKING:
    from gql_memory.tracing.spans import Tracing

log = logging.getLogger(__name__)

SCOPE = "gql_memory"
_lock = threading.Lock()
_tracer: Any = None  # the process's tracer once configured; False when tracing is off
_decided = False


def sdk_installed() -> bool:
    """The ``otel`` extra: the SDK and the OTLP/HTTP exporter."""
    return all(
        importlib.util.find_spec(name) is not None
        for name in ("opentelemetry.sdk", "opentelemetry.exporter.otlp.proto.http")
    )


def tracing_for(settings: Settings) -> Tracing | None:
    """The ``Tracing`` of this process for ``settings`` (its content opt-in), or None when
    tracing is off. The tracer provider is set up once per process, on the first call."""
    global _tracer, _decided
    if not _decided:
        with _lock:
            if not _decided:
                _tracer = _configure() if otel_traces_requested() else False
                _decided = True
    if not _tracer:
        return None
    from gql_memory.tracing.spans import Tracing

    return Tracing(_tracer, settings.trace_content)


def _configure() -> Any:
    if not sdk_installed():
        log.warning(
            "OpenTelemetry traces were asked for (OTEL_*) but the otel extra is not installed: "
            "pip install 'gql-memory[otel]'; tracing stays off"
        )
        return False
    from opentelemetry import trace
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor, ConsoleSpanExporter

    current = trace.get_tracer_provider()
    if isinstance(current, TracerProvider):  # the application set one up: join it
        return current.get_tracer(SCOPE)
    # Resource.create reads OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES; the provider
    # reads OTEL_TRACES_SAMPLER(_ARG), the processor OTEL_BSP_*, the exporter OTEL_EXPORTER_*
    provider = TracerProvider(resource=Resource.create({"service.name": _service_name()}))
    exporters = os.environ.get("OTEL_TRACES_EXPORTER", "otlp").strip().lower() or "otlp"
    for name in (e.strip() for e in exporters.split(",")):
        if name == "otlp":
            provider.add_span_processor(BatchSpanProcessor(_otlp_exporter()))
        elif name == "console":
            provider.add_span_processor(BatchSpanProcessor(ConsoleSpanExporter()))
        elif name != "none":
            log.warning("OTEL_TRACES_EXPORTER=%s is not supported (otlp, console); ignored", name)
    trace.set_tracer_provider(provider)
    return provider.get_tracer(SCOPE)


def _service_name() -> str:
    return os.environ.get("OTEL_SERVICE_NAME", "").strip() or "gql-memory"


def _otlp_exporter() -> Any:
    """OTLP over HTTP/protobuf (the extra's, and the default), or gRPC when
    OTEL_EXPORTER_OTLP_(TRACES_)PROTOCOL says so and its exporter is installed."""
    protocol = (
        os.environ.get("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
        or os.environ.get("OTEL_EXPORTER_OTLP_PROTOCOL")
        or "http/protobuf"
    ).strip()
    if protocol == "grpc":
        try:
            from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import (  # type: ignore[import-not-found]
                OTLPSpanExporter,
            )
        except ImportError:
            log.warning(
                "OTEL_EXPORTER_OTLP_PROTOCOL=grpc needs opentelemetry-exporter-otlp-proto-grpc; "
                "exporting over http/protobuf instead"
            )
        else:
            return OTLPSpanExporter()
    elif protocol != "http/protobuf":
        log.warning("OTLP protocol %r is not supported; using http/protobuf", protocol)
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter as Http

    return Http()
