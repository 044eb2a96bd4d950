"""`python -m stash_gepa.worker --job <key>` (as launched) or `<job_dir>` (by hand): run one GEPA job.

`--job` runs the job stored under `key` in object storage and reports to the gepa service over gRPC
(`stash_gepa.worker.remote`); a job directory is run in place, its result left in `result.json`.
The exit code is non-zero on failure.
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Sequence
from pathlib import Path

from stash_common.parent_death import follow_parent

USAGE = "usage: python -m stash_gepa.worker --job <job key> | <job_dir>"


def main(argv: Sequence[str] | None = None) -> int:
    """Run the job named on the command line; 0 on success, 1 on a failed job, 2 on bad usage."""
    args = sys.argv[1:] if argv is None else list(argv)
    stored = len(args) == 2 and args[0] == "--job" and bool(args[1])
    if not stored and (len(args) != 1 or not Path(args[0]).is_dir()):
        print(f"{USAGE} (a stored job's key, or an existing job directory)", file=sys.stderr)
        return 2
    # Read once, on first import: no hub downloads, and LiteLLM's model price map from its package, not the web.
    os.environ["HF_HUB_OFFLINE"] = "1"
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    # GEPA scores small batches between task-model calls; OpenMP's default spin-waiting threads, on CPUs
    # shared with other work, wait for a descheduled peer at every barrier (on 2 busy cores a minibatch
    # scored 2-5x slower than with passive waiting, which matched one thread's speed on idle cores).
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    if stored:
        # The launcher keeps this output (a pod's log): it is how an operator sees a job that failed.
        logging.basicConfig(stream=sys.stderr, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
        from stash_gepa.worker.remote import run_stored_job

        return run_stored_job(args[1])
    from stash_gepa.worker.runner import run_job

    return run_job(Path(args[0]))


if __name__ == "__main__":
    follow_parent()  # a local worker ends with the service that launched it
    sys.exit(main())
