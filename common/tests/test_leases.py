"""LeaseKeeper through a store outage: a locked SQLite database (the embedded profile's outage) is one warning
when it begins and one info line when the leases are renewed again; a bug is still an error with its traceback."""

import sqlite3
import threading
from pathlib import Path

from sqlalchemy import create_engine, text
from structlog.testing import capture_logs

from stash_common.leases import LeaseKeeper

FAILED_ROUNDS = 3


class LockedLeases:
    """Leases renewed in a SQLite file that another connection holds locked until `unlock`."""

    def __init__(self, path: Path) -> None:
        # A short busy timeout: the renewal gives up on the lock as the services' 30 s would, only sooner.
        self.engine = create_engine(f"sqlite:///{path}", connect_args={"timeout": 0.05})
        with self.engine.begin() as connection:
            connection.execute(text("CREATE TABLE leases (id TEXT PRIMARY KEY, renewals INTEGER NOT NULL)"))
            connection.execute(text("INSERT INTO leases VALUES ('job-1', 0)"))
        self.holder = sqlite3.connect(path, isolation_level=None)
        self.holder.execute("BEGIN EXCLUSIVE")
        self.failures = 0
        self.failed_enough = threading.Event()
        self.renewed = threading.Event()

    def renew(self, keys: list[str]) -> None:
        try:
            with self.engine.begin() as connection:
                for key in keys:
                    connection.execute(text("UPDATE leases SET renewals = renewals + 1 WHERE id = :id"), {"id": key})
        except Exception:
            self.failures += 1
            if self.failures >= FAILED_ROUNDS:
                self.failed_enough.set()
            raise
        self.renewed.set()

    def unlock(self) -> None:
        self.holder.execute("COMMIT")
        self.holder.close()


def test_a_locked_sqlite_database_is_one_warning_and_the_leases_are_renewed_once_it_is_free(tmp_path: Path) -> None:
    leases = LockedLeases(tmp_path / "leases.sqlite")
    keeper = LeaseKeeper("test-leases", lease_s=0.3, renew=leases.renew, reclaim=lambda: None)
    keeper.hold("job-1")
    with capture_logs() as logs:
        keeper.start()
        try:
            assert leases.failed_enough.wait(30)
            leases.unlock()
            assert leases.renewed.wait(30)
        finally:
            keeper.stop()

    above_info = [(entry["log_level"], entry["event"]) for entry in logs if entry["log_level"] != "info"]
    assert above_info == [("warning", "leases not renewed: a store is out of reach; retrying")]
    warning = next(entry for entry in logs if entry["log_level"] == "warning")
    assert (warning["store"], warning["error"]) == ("database", "(sqlite3.OperationalError) database is locked")
    assert "leases renewed again" in [entry["event"] for entry in logs if entry["log_level"] == "info"]
    with leases.engine.connect() as connection:
        assert connection.execute(text("SELECT renewals FROM leases")).scalar_one() >= 1


def test_a_failure_that_is_no_outage_is_an_error_every_round() -> None:
    failures = threading.Semaphore(0)

    def renew(_: list[str]) -> None:
        failures.release()
        raise KeyError("a bug")

    keeper = LeaseKeeper("test-leases", lease_s=0.3, renew=renew, reclaim=lambda: None)
    with capture_logs() as logs:
        keeper.start()
        try:
            for _ in range(2):
                assert failures.acquire(timeout=30)
        finally:
            keeper.stop()

    errors = [entry for entry in logs if entry["log_level"] == "error"]
    assert len(errors) >= 2
    assert {entry["event"] for entry in errors} == {"leases not renewed"}
