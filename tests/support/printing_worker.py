"""A stand-in worker (`python -m support.printing_worker <kind> --job <key>`): prints how it was run, then fails.

One line: its `__name__`, its arguments, and the variables the fork server sets before it preloads anything
(`HF_HUB_OFFLINE`, `OMP_WAIT_POLICY`), so a test reads them in the job's end. It exits with 1, which keeps its log.
"""

from __future__ import annotations

import os
import sys

if __name__ == "__main__":
    variables = {name: os.environ.get(name) for name in ("HF_HUB_OFFLINE", "OMP_WAIT_POLICY")}
    print(f"{__name__} {sys.argv[1:]} {variables}", flush=True)
    raise SystemExit(1)
