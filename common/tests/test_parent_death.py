"""A child asks for its parent-death signal itself, after exec, and is never left behind by a race."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time

import pytest

from stash_common.parent_death import PARENT_VARIABLE, die_with_parent_env

# A child that starts slowly (the sleep stands for its imports), then asks, then would run for a minute.
CHILD = """
import sys, time
time.sleep(float(sys.argv[1]))
from stash_common.parent_death import follow_parent
follow_parent()
time.sleep(60)
"""

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the parent-death signal is Linux's")


def _launch_from_a_thread(delay_s: float, thread_lives_s: float) -> subprocess.Popen[bytes]:
    started: list[subprocess.Popen[bytes]] = []

    def launch() -> None:
        env = {**os.environ, **die_with_parent_env(signal.SIGKILL)}
        started.append(subprocess.Popen([sys.executable, "-c", CHILD, str(delay_s)], env=env))
        time.sleep(thread_lives_s)

    thread = threading.Thread(target=launch)
    thread.start()
    thread.join()
    return started[0]


def _ended(process: subprocess.Popen[bytes], timeout_s: float = 20.0) -> int | None:
    try:
        return process.wait(timeout_s)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
        return None


def test_a_child_dies_when_the_thread_that_launched_it_ends() -> None:
    child = _launch_from_a_thread(delay_s=0.0, thread_lives_s=2.0)

    assert _ended(child) == -signal.SIGKILL


def test_a_child_whose_launching_thread_ended_before_it_asked_dies_at_once() -> None:
    """Linux hands such a child to another thread of the process, so only the child's own check can catch it."""
    child = _launch_from_a_thread(delay_s=1.0, thread_lives_s=0.0)

    assert _ended(child) == -signal.SIGKILL


def test_the_request_is_not_inherited_by_grandchildren() -> None:
    env = {**os.environ, **die_with_parent_env(signal.SIGKILL)}
    code = "import os; from stash_common.parent_death import follow_parent; follow_parent(); print(os.environ.get(%r))"
    output = subprocess.run([sys.executable, "-c", code % PARENT_VARIABLE], env=env, capture_output=True, text=True)

    assert output.stdout.strip() == "None"
