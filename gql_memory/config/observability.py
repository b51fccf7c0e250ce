"""Observability: logs, Prometheus metrics, and whether the environment asks for
OpenTelemetry traces (the standard OTEL_* variables, which the SDK itself reads)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Literal

from pydantic import AliasChoices, Field


class LoggingSettings:
    """Settings of logs and trace contents (part of ``Settings``)."""

    log_level: str = "INFO"
    log_format: Literal["auto", "json", "text"] = Field(
        default="auto",
        description="auto: readable lines when stderr is a terminal, JSON otherwise; json: one "
        "JSON object per line (request id, duration...); text: one plain line per record.",
    )
    trace_content: bool = Field(
        default=False,
        description="OpenTelemetry (docs/observability.md): record query texts and memory "
        "contents in spans (gen_ai.memory.query.text, gen_ai.memory.records). Off, spans carry "
        "ids and names only, never tenant content.",
    )


class MetricsSettings:
    """Settings of the Prometheus metrics (part of ``Settings``)."""

    metrics: bool = Field(default=True, description="Serve Prometheus metrics at /metrics.")
    metrics_public: bool = Field(
        default=False,
        description="Serve /metrics to anyone who can reach it (a Prometheus on a private "
        "network); by default it needs an admin-scope key or, where keys are required, a "
        "request from this machine.",
    )
    prometheus_multiproc_dir: Path | None = Field(
        default=None,
        validation_alias=AliasChoices("PROMETHEUS_MULTIPROC_DIR", "prometheus_multiproc_dir"),
        description="prometheus-client multiprocess mode: the directory where every worker "
        "writes its metrics, so /metrics on any worker reports the sum of all of them.",
    )


# The standard OpenTelemetry variables that ask for traces (the SDK reads them, and the rest:
# OTEL_EXPORTER_OTLP_PROTOCOL, OTEL_SERVICE_NAME, OTEL_TRACES_SAMPLER ...).
OTEL_TRACES_REQUESTED_BY = (
    "OTEL_EXPORTER_OTLP_ENDPOINT",
    "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
    "OTEL_TRACES_EXPORTER",
)


def otel_traces_requested() -> bool:
    """True when the environment asks for OpenTelemetry traces: an OTLP endpoint, or a
    traces exporter other than ``none``, and the SDK not disabled (OTEL_SDK_DISABLED)."""
    if os.environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return False
    exporter = os.environ.get("OTEL_TRACES_EXPORTER", "").strip().lower()
    if exporter == "none":
        return False
    return any(os.environ.get(name, "").strip() for name in OTEL_TRACES_REQUESTED_BY)
