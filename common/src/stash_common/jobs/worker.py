"""`python -m stash_common.jobs.worker <kind> --job <key>` (as launched) or `<kind> <job_dir>` (by hand).

The one entry point of every worker process. `--job` runs the job stored under `key` in object
storage, which reports to its service over gRPC; a job directory is run in place (a training or GEPA
job leaves its result in `result.json`). The kind (`stash_common.jobs.kinds`) says which worker
package runs it. The exit code is 0 on success, 1 on a failed job, 2 on bad usage.
"""

from __future__ import annotations

import importlib
import logging
import sys
from collections.abc import Sequence
from pathlib import Path

from stash_common.jobs.kinds import KINDS
from stash_common.parent_death import follow_parent

USAGE = f"usage: python -m stash_common.jobs.worker {{{','.join(KINDS)}}} --job <job key> | <job_dir>"


def main(argv: Sequence[str] | None = None) -> int:
    """Run the job named on the command line; 0 on success, 1 on a failed job, 2 on bad usage."""
    args = sys.argv[1:] if argv is None else list(argv)
    kind = KINDS.get(args[0]) if args else None
    job = args[1:]
    stored = len(job) == 2 and job[0] == "--job" and bool(job[1])
    if kind is None or (not stored and (len(job) != 1 or not Path(job[0]).is_dir())):
        print(f"{USAGE} (a known kind, then a stored job's key or an existing job directory)", file=sys.stderr)
        return 2
    kind.prepare_environment()
    if stored:
        # The launcher keeps this output (a pod's log): it is how an operator sees a job that failed.
        logging.basicConfig(stream=sys.stderr, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
        run_stored_job = importlib.import_module(f"{kind.package}.remote").run_stored_job
        return int(run_stored_job(job[1]))
    run_job = importlib.import_module(f"{kind.package}.runner").run_job
    return int(run_job(Path(job[0])))


if __name__ == "__main__":
    follow_parent()  # a local worker ends with the service that launched it
    sys.exit(main())
