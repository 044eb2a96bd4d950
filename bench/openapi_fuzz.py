"""A long schemathesis run against a whole embedded stack (`stash-rm up`): every phase (examples, coverage,
fuzzing, stateful), with the checks and exclusions of tests/e2e/test_schemathesis.py and many more cases.
Prints schemathesis's own summary, then a table of the answers by status code (from its HAR report), with the
5xx ones named by operation.

    .venv/bin/python bench/openapi_fuzz.py [--examples 200] [--max-time 900] [--seed 1]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path

import orjson
from rich.console import Console
from rich.table import Table

sys.path[:0] = [str(Path(__file__).parents[1] / "tests")]

from support.schemathesis import schemathesis_command  # noqa: E402
from support.stack import running_stack  # noqa: E402


def statuses(har_path: Path) -> tuple[Counter[int], Counter[str]]:
    """Answers by status code, and the 5xx answers by `METHOD path`."""
    entries = orjson.loads(har_path.read_bytes())["log"]["entries"]
    by_status: Counter[int] = Counter(entry["response"]["status"] for entry in entries)
    errors: Counter[str] = Counter(
        f"{entry['request']['method']} {entry['request']['url'].split('?')[0]}"
        for entry in entries
        if entry["response"]["status"] >= 500
    )
    return by_status, errors


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--examples", type=int, default=200)
    parser.add_argument("--max-time", type=int, default=900)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="stash-openapi-") as data_dir, running_stack(Path(data_dir)) as stack:
        key = stack.create_user("fuzzer")
        har = Path(data_dir) / "run.har"
        command = schemathesis_command(stack, key, args.examples, args.seed, args.max_time)
        command += ["--report", "har", "--report-har-path", str(har)]
        run = subprocess.run(command, capture_output=True, text=True, check=False, cwd=data_dir)
        print(run.stdout[-6000:])
        by_status, errors = statuses(har)
    table = Table(
        "status", "answers", title=f"schemathesis, {sum(by_status.values()):,} requests (exit {run.returncode})"
    )
    for status, count in sorted(by_status.items()):
        table.add_row(str(status), f"{count:,}")
    for operation, count in errors.most_common():
        table.add_row(f"5xx: {operation}", f"{count:,}")
    Console(width=140).print(table)


if __name__ == "__main__":
    main()
