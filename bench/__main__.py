"""Run the benchmarks and write their results to docs/benchmarks.md.

`python -m bench` runs all; `python -m bench throughput` runs the named ones.
"""

from __future__ import annotations

import importlib
import platform
import sys
import time

from bench.common import DOCS

BENCHMARKS = [
    "hot_paths",
    "throughput",
    "insight_search",
    "hybrid_search",
    "graph_neighbors",
    "locomo_recall",
]


def main(names: list[str]) -> None:
    names = names or BENCHMARKS
    lines = [
        "# Benchmark results",
        "",
        f"Measured {time.strftime('%Y-%m-%d')} on {platform.machine()}, "
        f"Python {platform.python_version()}, embedded PostgreSQL 18; "
        "2 cores / 24 GiB unless noted. Reproduce with `make bench`.",
        "",
    ]
    for name in names:
        module = importlib.import_module(f"bench.{name}")
        print(f"running bench.{name} ...", flush=True)
        lines += module.main()
    DOCS.mkdir(exist_ok=True)
    (DOCS / "benchmarks.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main(sys.argv[1:])
