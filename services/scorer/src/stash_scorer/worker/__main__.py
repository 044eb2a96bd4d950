"""`python -m stash_scorer.worker <job_dir>`: run one scoring job; the exit code is non-zero on failure."""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from pathlib import Path

USAGE = "usage: python -m stash_scorer.worker <job_dir>"


def main(argv: Sequence[str] | None = None) -> int:
    """Run the job directory named on the command line; 0 on success, 1 on a failed job, 2 on bad usage."""
    args = sys.argv[1:] if argv is None else list(argv)
    if len(args) != 1 or not Path(args[0]).is_dir():
        print(f"{USAGE} (an existing job directory)", file=sys.stderr)
        return 2
    # huggingface_hub and tokenizers read these once, when first imported: set them before anything loads them.
    os.environ["HF_HUB_OFFLINE"] = "1"
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    from stash_scorer.worker.runner import run_job

    return run_job(Path(args[0]))


if __name__ == "__main__":
    sys.exit(main())
