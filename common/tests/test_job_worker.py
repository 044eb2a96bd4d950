"""The one worker entry point: `python -m stash_common.jobs.worker <kind> --job <key> | <job_dir>`."""

import subprocess
import sys
from pathlib import Path

import pytest

from stash_common.errors import InvalidArgument
from stash_common.jobs.kinds import KINDS, worker_kind
from stash_common.jobs.launch import JobLaunch, worker_command
from stash_common.jobs.worker import main


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_every_kind_needs_one_existing_job_directory(kind: str, tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "stash_common.jobs.worker", kind, str(tmp_path / "absent")],
        capture_output=True,
        text=True,
    )

    assert done.returncode == 2
    assert "usage: python -m stash_common.jobs.worker {train,score,gepa} --job <job key> | <job_dir>" in done.stderr


@pytest.mark.parametrize("args", [[], ["evaluate", "--job", "jobs/x/1"], ["train", "--job", ""], ["train", "--job"]])
def test_an_unknown_kind_or_a_missing_key_is_bad_usage(args: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert main(args) == 2
    assert "a known kind, then a stored job's key or an existing job directory" in capsys.readouterr().err


def test_every_kind_names_a_worker_package_with_both_entry_functions() -> None:
    packages = {kind.name: kind.package for kind in KINDS.values()}

    assert packages == {"train": "stash_trainer.worker", "score": "stash_scorer.worker", "gepa": "stash_gepa.worker"}
    for package in packages.values():
        root = Path(__import__(package.split(".")[0]).__file__ or "").parent / "worker"
        assert "def run_stored_job(key: str) -> int:" in (root / "remote.py").read_text()
        assert "def run_job(job_dir: Path" in (root / "runner.py").read_text()


def test_a_launch_runs_the_entry_point_with_its_kind_and_key() -> None:
    launch = JobLaunch("score", "job-1", "job-1", "jobs/scorer/job-1")

    assert worker_command(launch, "python") == [
        "python",
        "-m",
        "stash_common.jobs.worker",
        "score",
        "--job",
        launch.job_key,
    ]


def test_an_unknown_kind_is_named_with_the_known_ones() -> None:
    with pytest.raises(InvalidArgument, match="unknown job kind 'evaluate'; known kinds: train, score, gepa"):
        worker_kind("evaluate")
