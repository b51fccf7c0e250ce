"""Make letta_lettabot_builder.af: a real Agent File, trimmed.

Source: lettabot-builder.af from github.com/letta-ai/agent-file (Apache-2.0, see
LETTA_LICENSE_NOTICE.md), path agents/@letta-ai/lettabot-builder/lettabot-builder.af at
commit 97989b2f2d21e79a71ce244892b3d18bcd494a4b. Run:

    python tests/data/interchange/trim_letta.py lettabot-builder.af

It keeps the file's structure and every field as exported by Letta, and only drops messages:
each agent keeps its first MESSAGES (and the in-context ids of those), so the fixture stays
small.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

MESSAGES = 12
OUT = Path(__file__).with_name("letta_lettabot_builder.af")


def main(source: str) -> None:
    document = json.loads(Path(source).read_text())
    for agent in document["agents"]:
        agent["messages"] = agent["messages"][:MESSAGES]
        kept = {m["id"] for m in agent["messages"]}
        agent["in_context_message_ids"] = [i for i in agent["in_context_message_ids"] if i in kept]
    OUT.write_text(json.dumps(document, indent=2, ensure_ascii=False) + "\n")
    print(f"wrote {OUT} ({OUT.stat().st_size} bytes)")


if __name__ == "__main__":
    main(sys.argv[1])
