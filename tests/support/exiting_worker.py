"""A stand-in worker (`python -m support.exiting_worker <kind> --job <key>`): prints a line naming its job, then exits.

`STASH_TEST_EXIT_CODE` is the exit code (default 0).
"""

from __future__ import annotations

import os
import sys

if __name__ == "__main__":
    print(f"worker for {sys.argv[-1]} ends on purpose", file=sys.stderr, flush=True)
    raise SystemExit(int(os.environ.get("STASH_TEST_EXIT_CODE", "0")))
