"""`python -m stash_gepa.worker <job_dir>`: run one GEPA job; the exit code is non-zero on failure."""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from pathlib import Path

USAGE = "usage: python -m stash_gepa.worker <job_dir>"


def main(argv: Sequence[str] | None = None) -> int:
    """Run the job directory named on the command line; 0 on success, 1 on a failed job, 2 on bad usage."""
    args = sys.argv[1:] if argv is None else list(argv)
    if len(args) != 1 or not Path(args[0]).is_dir():
        print(f"{USAGE} (an existing job directory)", file=sys.stderr)
        return 2
    # Read once, on first import: no hub downloads, and LiteLLM's model price map from its package, not the web.
    os.environ["HF_HUB_OFFLINE"] = "1"
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    from stash_gepa.worker.runner import run_job

    return run_job(Path(args[0]))


if __name__ == "__main__":
    sys.exit(main())
