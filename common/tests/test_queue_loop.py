"""QueueLoop: a pass that finds a peer out of reach is retried soon, quietly; other failures keep the loop alive."""

import threading

from structlog.testing import capture_logs

from stash_common.coordination import InProcessWakeups
from stash_common.errors import Unavailable
from stash_common.queue_loop import Backoff, QueueLoop


def test_backoff_doubles_up_to_the_longest_delay_and_starts_again_after_reset() -> None:
    backoff = Backoff(0.5, 3.0)

    delays = [backoff.next_delay() for _ in range(5)]
    backoff.reset()

    assert delays == [0.5, 1.0, 2.0, 3.0, 3.0]
    assert backoff.next_delay() == 0.5


def test_a_sweep_against_a_peer_not_up_yet_is_retried_long_before_the_next_sweep_and_logged_at_info() -> None:
    sweeps: list[int] = []
    third_sweep = threading.Event()

    def sweep() -> None:
        sweeps.append(len(sweeps))
        if len(sweeps) < 3:
            raise Unavailable("ingest answered UNAVAILABLE: connection refused")
        third_sweep.set()

    loop = QueueLoop("test-loop", InProcessWakeups(), "test", lambda: None, sweep, sweep_interval_s=3600)
    with capture_logs() as logs:
        loop.start()
        try:
            reached = third_sweep.wait(10)  # 0.5 s, then 1 s of backoff; the sweep interval is an hour
        finally:
            loop.stop()

    assert reached
    retries = [entry for entry in logs if entry["event"] == "a peer is out of reach; trying again"]
    assert [(entry["log_level"], entry["retry_in_s"]) for entry in retries] == [("info", 0.5), ("info", 1.0)]
    assert not [entry for entry in logs if entry["log_level"] == "error"]
