"""What `python -m stash_<service>` runs: the service's main, with configuration errors as one line.

A pod's log and a terminal should show `error: STASH_INGEST_DATABASE_URL is not set (…)`, not a
traceback: the message already names the variable and how to fix it.
"""

from __future__ import annotations

import sys
from collections.abc import Callable

from stash_common.errors import ConfigError
from stash_common.parent_death import follow_parent


def run(main: Callable[[], None]) -> None:
    """Call `main`; a ConfigError ends the process with exit code 1 and its message on stderr.

    A service that `stash-rm up` started ends with it (`stash_common.parent_death`).
    """
    follow_parent()
    try:
        main()
    except ConfigError as error:
        sys.stderr.write(f"error: {error}\n")
        raise SystemExit(1) from None
