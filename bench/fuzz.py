"""`make fuzz`: schemathesis against a fresh `gql-memory serve` for a long run.

    python -m bench.fuzz [--examples-per-operation 1500] [--stateful-examples 500] [--seed N]

Every query and mutation gets ``examples-per-operation`` generated requests (random seed
unless given), then the stateful phase runs. The run fails (exit 1) on any 5xx, any error
without ``extensions.code``, any code but the accepted client ones, or any ERROR line in the
server's log; the figures are written to docs/benchmarks-security.md (section "Fuzzing").
"""

from __future__ import annotations

import argparse
import random
import shutil
import sys
import tempfile
import time
from pathlib import Path

from bench.common import DOCS, write_section
from tests.graphql_fuzz import ACCEPTED_CODES, error_lines, fuzz
from tests.processes import ServeProcess

SECTION = "## Fuzzing (schemathesis, `make fuzz`)"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.fuzz", description=__doc__)
    parser.add_argument("--examples-per-operation", type=int, default=1500)
    parser.add_argument("--stateful-examples", type=int, default=500)
    parser.add_argument("--seed", type=int, default=None)
    args = parser.parse_args(argv)
    seed = args.seed if args.seed is not None else random.randrange(2**32)
    root = Path(tempfile.mkdtemp(prefix="gqlm-fuzz-"))
    server = ServeProcess(root / "data").start()
    started = time.monotonic()
    try:
        report = fuzz(
            f"{server.base_url}/graphql",
            examples_per_operation=args.examples_per_operation,
            stateful_examples=args.stateful_examples,
            random_seed=seed,
        )
        errors = error_lines(Path(server.log_path)) if server.log_path else []
    finally:
        server.stop()
        shutil.rmtree(root, ignore_errors=True)
    seconds = time.monotonic() - started
    codes = ", ".join(f"{code} {count}" for code, count in report.codes.most_common())
    lines = [
        SECTION,
        "",
        f"Measured {time.strftime('%Y-%m-%d')}: schemathesis, seed {seed}, "
        f"{args.examples_per_operation} generated requests per operation (all 33 queries and "
        f"mutations) plus a stateful phase of {args.stateful_examples} runs.",
        "",
        f"- requests: {report.cases} in {seconds:.0f} s",
        f"- errors returned (expected: generated inputs are mostly invalid): {codes or 'none'}",
        f"- accepted codes: {', '.join(sorted(ACCEPTED_CODES))}",
        f"- problems (5xx, uncoded errors, other codes): {len(report.problems)}",
        f"- server log lines at ERROR: {len(errors)}",
        "",
        f"Replay: `python -m bench.fuzz --seed {seed} --examples-per-operation "
        f"{args.examples_per_operation} --stateful-examples {args.stateful_examples}`.",
        "",
    ]
    for problem in report.problems[:20] + errors[:20]:
        lines.append(f"    {problem[:300]}")
    write_section(DOCS / "benchmarks-security.md", lines)
    print("\n".join(lines))
    return 1 if report.problems or errors else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
