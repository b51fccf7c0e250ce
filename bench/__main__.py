"""Run the benchmarks and write their results to docs/benchmarks.md.

`python -m bench` runs all and rewrites the file; `python -m bench hot_paths graph_neighbors`
runs the named ones and replaces only their sections (the others stay as they were).
`python -m bench embedder_outage --no-write` runs one of the benchmarks that write their own
page (OWN_PAGES) with its own options, as `python -m bench.embedder_outage --no-write` does.
"""

from __future__ import annotations

import importlib
import platform
import sys
import time

from bench.common import DOCS, write_section

BENCHMARKS = [
    "hot_paths",
    "search_http",
    "throughput",
    "insight_search",
    "hybrid_search",
    "tenant_search",
    "graph_neighbors",
    "locomo_recall",
    "tracing",
    "citus",
]
RESULTS = DOCS / "benchmarks.md"
# Run alone, with their own options; each writes its section of its own page and exits
# non-zero when its verdict fails.
# soak, embedder_outage, fuzz: docs/benchmarks-security.md; consolidation: docs/benchmarks.md
OWN_PAGES = ["soak", "embedder_outage", "fuzz", "consolidation"]


def sections(lines: list[str]) -> list[list[str]]:
    """A benchmark's output split at its "## " headings."""
    parts: list[list[str]] = []
    for line in lines:
        if line.startswith("## ") or not parts:
            parts.append([])
        parts[-1].append(line)
    return parts


def main(names: list[str]) -> None:
    header = [
        "# Benchmark results",
        "",
        f"Measured {time.strftime('%Y-%m-%d')} on {platform.machine()}, "
        f"Python {platform.python_version()}, embedded PostgreSQL 18; "
        "2 cores / 24 GiB unless noted. Reproduce with `make bench`.",
        "",
    ]
    results = []
    for name in names or BENCHMARKS:
        module = importlib.import_module(f"bench.{name}")
        print(f"running bench.{name} ...", flush=True)
        results += module.main()
    DOCS.mkdir(exist_ok=True)
    if names and RESULTS.exists():
        for section in sections(results):
            write_section(RESULTS, section)
    else:
        RESULTS.write_text("\n".join(header + results) + "\n")
    print("\n".join(results))


if __name__ == "__main__":
    if sys.argv[1:2] and sys.argv[1] in OWN_PAGES:
        own = importlib.import_module(f"bench.{sys.argv[1]}")
        sys.exit(own.main(sys.argv[2:]))
    main(sys.argv[1:])
