"""Reading a local stack's logs (`<data dir>/logs/<service>.log`, one structured JSON record a line)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import orjson

QUIET_LEVELS = frozenset({"debug", "info"})


def complaints(data_dir: Path) -> list[str]:
    """Every record above info (warnings, errors), and every line that is no record (a traceback or warning a
    library printed), as `<service>: <level> <event> <error>`, with `[loop <name>]` where a queue loop logged it."""
    found = []
    for log in sorted((data_dir / "logs").glob("*.log")):
        for line in log.read_text(errors="replace").splitlines():
            try:
                record = orjson.loads(line)
            except orjson.JSONDecodeError:
                found.append(f"{log.stem}: unstructured {line[:300]}")
                continue
            if record.get("level", "info") not in QUIET_LEVELS:
                loop = f" [loop {record['loop']}]" if "loop" in record else ""
                event = f"{record.get('level')} {record.get('event')} {record.get('error', '')}{loop}"
                found.append(f"{log.stem}: {event}"[:300])
    return found


def complaint_counts(data_dir: Path) -> Counter[str]:
    """`complaints`, counted by their service, level and event (for a bench's table)."""
    return Counter(complaint.split(" {")[0][:120] for complaint in complaints(data_dir))
