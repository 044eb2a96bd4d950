"""Ruff's lint and format rules from pyproject.toml hold for every hand-written file."""

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("command", [["check", "."], ["format", "--check", "."]])
def test_ruff_passes(command: list[str]) -> None:
    ruff = shutil.which("ruff", path=str(Path(sys.executable).parent))
    assert ruff, "ruff is part of the [dev] extra"

    result = subprocess.run([ruff, *command], cwd=ROOT, capture_output=True, text=True, timeout=120)

    assert result.returncode == 0, result.stdout + result.stderr
